//! The field checks the command builders share: scopes, tokens, results,
//! error reports and their metadata, fences and durations, and how a bound
//! reads in a violation.

use chrono::TimeDelta;

use crate::error::Violations;
use crate::limits::Limits;
use crate::model::{ErrorReport, Fence, Metadata, Scope, SuccessResult};

const NUL_REFUSED: &str = "must not contain NUL characters";

impl Limits {
    pub(super) fn scope(
        &self,
        field: &str,
        scope: Option<Scope>,
        violations: &mut Violations,
    ) -> Scope {
        let Some(scope) = scope else {
            violations.add(field, "is required");
            return Scope {
                operation: String::new(),
                key: String::new(),
            };
        };
        self.check_scope(field, &scope, violations);
        scope
    }

    pub(super) fn check_scope(&self, field: &str, scope: &Scope, violations: &mut Violations) {
        self.check_operation(&format!("{field}.operation"), &scope.operation, violations);
        self.check_key(&format!("{field}.key"), &scope.key, violations);
    }

    pub(super) fn check_operation(
        &self,
        field: &str,
        operation: &str,
        violations: &mut Violations,
    ) {
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

    fn check_key(&self, field: &str, key: &str, violations: &mut Violations) {
        if key.is_empty() || key.len() > self.max_key_bytes {
            violations.add(field, format!("must be 1-{} bytes", self.max_key_bytes));
        } else if key.contains('\0') {
            violations.add(field, NUL_REFUSED);
        }
    }

    pub(super) fn check_claim_token(&self, field: &str, token: &[u8], violations: &mut Violations) {
        if token.len() > self.max_claim_token_bytes {
            violations.add(
                field,
                format!("must be at most {} bytes", self.max_claim_token_bytes),
            );
        }
    }

    pub(super) fn check_result(
        &self,
        field: &str,
        result: &SuccessResult,
        violations: &mut Violations,
    ) {
        check_bytes(
            &format!("{field}.body"),
            result.body.len(),
            self.max_result_bytes,
            violations,
        );
        check_text(
            &format!("{field}.content_type"),
            &result.content_type,
            self.max_content_type_bytes,
            violations,
        );
        self.check_metadata(&format!("{field}.metadata"), &result.metadata, violations);
    }

    pub(super) fn check_error_report(
        &self,
        field: &str,
        error: &ErrorReport,
        violations: &mut Violations,
    ) {
        check_text(
            &format!("{field}.code"),
            &error.code,
            self.max_error_code_bytes,
            violations,
        );
        check_text(
            &format!("{field}.message"),
            &error.message,
            self.max_error_message_bytes,
            violations,
        );
        self.check_metadata(&format!("{field}.metadata"), &error.metadata, violations);
    }

    fn check_metadata(&self, field: &str, metadata: &Metadata, violations: &mut Violations) {
        if metadata.len() > self.max_metadata_entries {
            violations.add(
                field,
                format!("at most {} entries", self.max_metadata_entries),
            );
        }
        // The bound is per entry, key and value together: it is what a
        // stored entry costs.
        let oversized = metadata
            .iter()
            .any(|(name, value)| name.len() + value.len() > self.max_metadata_entry_bytes);
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
                    "each entry (key and value together) must be at most {} bytes",
                    self.max_metadata_entry_bytes
                ),
            );
        }
    }
}

/// Fences start at 1: zero is proto3's "not sent".
pub(super) fn check_fence(field: &str, fence: Fence, violations: &mut Violations) {
    if fence == 0 {
        violations.add(field, "is required (fences start at 1)");
    }
}

/// A duration field: absent means the default; present must lie in bounds.
impl Limits {
    /// An admin's reason, as the audit log (and a history) keeps it: 1 to
    /// `max_forget_reason_bytes` bytes once trimmed, one line. `examples`
    /// say what a reason looks like, in the refusal.
    pub(super) fn admin_reason(
        &self,
        reason: &str,
        examples: &str,
        violations: &mut Violations,
    ) -> String {
        let reason = reason.trim();
        if reason.is_empty() || reason.len() > self.max_forget_reason_bytes {
            violations.add(
                "reason",
                format!(
                    "must be 1-{} bytes: say why ({examples})",
                    self.max_forget_reason_bytes
                ),
            );
        } else if reason.chars().any(char::is_control) {
            // One line in the audit log and the history, as printed.
            violations.add("reason", "may not contain control characters");
        }
        reason.to_owned()
    }
}

pub(super) fn duration_or_default(
    field: &str,
    requested: Option<TimeDelta>,
    default: TimeDelta,
    bounds: (TimeDelta, TimeDelta),
    violations: &mut Violations,
) -> TimeDelta {
    let Some(requested) = requested else {
        return default;
    };
    check_between(field, requested, bounds, violations);
    requested
}

pub(super) fn within(value: TimeDelta, (min, max): (TimeDelta, TimeDelta)) -> bool {
    min <= value && value <= max
}

pub(super) fn check_between(
    field: &str,
    value: TimeDelta,
    (min, max): (TimeDelta, TimeDelta),
    violations: &mut Violations,
) {
    if !within(value, (min, max)) {
        violations.add(
            field,
            format!("must be between {} and {}", describe(min), describe(max)),
        );
    }
}

fn check_bytes(field: &str, value: usize, max: usize, violations: &mut Violations) {
    if value > max {
        violations.add(field, format!("must be at most {max} bytes"));
    }
}

/// Text that is stored: bounded, and without NUL, which Postgres text
/// cannot hold (every store must accept exactly the same input).
fn check_text(field: &str, value: &str, max: usize, violations: &mut Violations) {
    check_bytes(field, value.len(), max, violations);
    if value.contains('\0') {
        violations.add(field, NUL_REFUSED);
    }
}

/// `1500ms`, `30s`, `5m`, `24h`: how bounds read in error messages.
pub(crate) fn describe(duration: TimeDelta) -> String {
    let millis = duration.num_milliseconds();
    match millis {
        m if m % 3_600_000 == 0 && m > 0 => format!("{}h", m / 3_600_000),
        m if m % 60_000 == 0 && m > 0 => format!("{}m", m / 60_000),
        m if m % 1000 == 0 => format!("{}s", m / 1000),
        m => format!("{m}ms"),
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use crate::admit::testing::{refused_fields, violations_of};
    use crate::error::{FieldViolation, Violations};
    use crate::limits::Limits;
    use crate::model::{Metadata, OperationId, SuccessResult};
    use crate::requested::CompleteRequested;

    #[test]
    fn metadata_entries_are_bounded_key_and_value_together() {
        let limits = Limits::default();
        let complete = |name: usize, value: usize| CompleteRequested {
            operation_id: OperationId(Uuid::nil()),
            fence: 1,
            result: Some(SuccessResult {
                metadata: Metadata::from([("k".repeat(name), "v".repeat(value))]),
                ..SuccessResult::default()
            }),
        };
        limits
            .complete(complete(128, 128), Violations::default())
            .expect("256 bytes in all");
        assert_eq!(
            violations_of(limits.complete(complete(200, 100), Violations::default())),
            [FieldViolation::new(
                "result.metadata",
                "each entry (key and value together) must be at most 256 bytes"
            )]
        );
        assert_eq!(
            refused_fields(limits.complete(complete(1, 256), Violations::default())),
            ["result.metadata"]
        );
    }
}
