//! The bounds of DESIGN.md, configurable, and the checks that enforce them.
//! Every check names the request field it refuses, so that callers get a
//! BadRequest field violation they can act on.

use chrono::TimeDelta;

use super::error::FieldViolation;
use super::model::Metadata;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub max_key_bytes: usize,
    pub max_operation_chars: usize,
    pub max_claim_token_bytes: usize,
    pub min_lease: TimeDelta,
    pub max_lease: TimeDelta,
    pub default_lease: TimeDelta,
    pub default_max_attempt_duration: TimeDelta,
    pub max_attempt_duration: TimeDelta,
    pub default_max_attempts: u32,
    pub max_attempts: u32,
    pub default_retention: TimeDelta,
    pub max_retention: TimeDelta,
    pub max_operation_deadline: TimeDelta,
    pub default_retry_after: TimeDelta,
    pub max_retry_after: TimeDelta,
    pub max_result_bytes: usize,
    pub max_content_type_bytes: usize,
    pub max_metadata_entries: usize,
    pub max_metadata_entry_bytes: usize,
    pub max_error_code_bytes: usize,
    pub max_error_message_bytes: usize,
    pub default_page_size: u32,
    pub max_page_size: u32,
    pub max_wait: TimeDelta,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_key_bytes: 255,
            max_operation_chars: 128,
            max_claim_token_bytes: 64,
            min_lease: TimeDelta::seconds(1),
            max_lease: TimeDelta::hours(1),
            default_lease: TimeDelta::seconds(30),
            default_max_attempt_duration: TimeDelta::minutes(5),
            max_attempt_duration: TimeDelta::hours(24),
            default_max_attempts: 5,
            max_attempts: 100,
            default_retention: TimeDelta::hours(24),
            max_retention: TimeDelta::days(30),
            max_operation_deadline: TimeDelta::days(30),
            default_retry_after: TimeDelta::seconds(1),
            max_retry_after: TimeDelta::hours(1),
            max_result_bytes: 1024 * 1024,
            max_content_type_bytes: 255,
            max_metadata_entries: 16,
            max_metadata_entry_bytes: 256,
            max_error_code_bytes: 255,
            max_error_message_bytes: 4 * 1024,
            default_page_size: 100,
            max_page_size: 1000,
            max_wait: TimeDelta::seconds(30),
        }
    }
}

const NUL_REFUSED: &str = "must not contain NUL characters";

/// Collects every violation of one request, so the caller sees them all at once.
#[derive(Debug, Default)]
pub struct Violations(pub Vec<FieldViolation>);

impl Violations {
    pub fn add(&mut self, field: impl Into<String>, description: impl Into<String>) {
        self.0.push(FieldViolation::new(field, description));
    }

    pub fn into_result(self) -> Result<(), super::error::Error> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(super::error::Error::InvalidArgument(self.0))
        }
    }
}

impl Limits {
    pub fn check_operation(&self, field: &str, operation: &str, violations: &mut Violations) {
        let allowed = |character: char| {
            character.is_ascii_alphanumeric() || matches!(character, '.' | '_' | '/' | '-')
        };
        let length = operation.chars().count();
        if length == 0 || length > self.max_operation_chars {
            violations.add(
                field,
                format!("must be 1-{} characters", self.max_operation_chars),
            );
        } else if !operation.chars().all(allowed) {
            violations.add(field, "may contain only A-Z a-z 0-9 . _ / -");
        }
    }

    pub fn check_key(&self, field: &str, key: &str, violations: &mut Violations) {
        if key.is_empty() || key.len() > self.max_key_bytes {
            violations.add(field, format!("must be 1-{} bytes", self.max_key_bytes));
        } else if key.contains('\0') {
            violations.add(field, NUL_REFUSED);
        }
    }

    pub fn check_claim_token(&self, field: &str, token: &[u8], violations: &mut Violations) {
        if token.len() > self.max_claim_token_bytes {
            violations.add(
                field,
                format!("must be at most {} bytes", self.max_claim_token_bytes),
            );
        }
    }

    /// A duration field: absent means the default; present must lie in bounds.
    pub fn duration_or_default(
        field: &str,
        requested: Option<TimeDelta>,
        default: TimeDelta,
        (min, max): (TimeDelta, TimeDelta),
        violations: &mut Violations,
    ) -> TimeDelta {
        let Some(requested) = requested else {
            return default;
        };
        if requested < min || requested > max {
            violations.add(
                field,
                format!("must be between {} and {}", describe(min), describe(max)),
            );
        }
        requested
    }

    pub fn check_metadata(&self, field: &str, metadata: &Metadata, violations: &mut Violations) {
        if metadata.len() > self.max_metadata_entries {
            violations.add(
                field,
                format!("at most {} entries", self.max_metadata_entries),
            );
        }
        let oversized = metadata.iter().any(|(name, value)| {
            name.len() > self.max_metadata_entry_bytes
                || value.len() > self.max_metadata_entry_bytes
        });
        let with_nul = metadata
            .iter()
            .any(|(name, value)| name.contains('\0') || value.contains('\0'));
        if with_nul {
            violations.add(field, NUL_REFUSED);
        }
        if oversized {
            violations.add(
                field,
                format!(
                    "keys and values must be at most {} bytes each",
                    self.max_metadata_entry_bytes
                ),
            );
        }
    }

    pub fn check_bytes(field: &str, value: usize, max: usize, violations: &mut Violations) {
        if value > max {
            violations.add(field, format!("must be at most {max} bytes"));
        }
    }

    /// Text that is stored: bounded, and without NUL, which Postgres text
    /// cannot hold (every store must accept exactly the same input).
    pub fn check_text(field: &str, value: &str, max: usize, violations: &mut Violations) {
        Self::check_bytes(field, value.len(), max, violations);
        if value.contains('\0') {
            violations.add(field, NUL_REFUSED);
        }
    }
}

/// `1500ms`, `30s`, `5m`, `24h`: how bounds read in error messages.
pub fn describe(duration: TimeDelta) -> String {
    let millis = duration.num_milliseconds();
    match millis {
        m if m % 3_600_000 == 0 && m > 0 => format!("{}h", m / 3_600_000),
        m if m % 60_000 == 0 && m > 0 => format!("{}m", m / 60_000),
        m if m % 1000 == 0 => format!("{}s", m / 1000),
        m => format!("{m}ms"),
    }
}
