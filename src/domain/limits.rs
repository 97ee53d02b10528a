//! The bounds of DESIGN.md, configurable, and the rules that turn what a
//! caller asked for into a command: defaults for what it left out, bounds for
//! what it gave, rules across fields. Every check names the request field it
//! refuses, and a request with several bad fields hears about all of them at
//! once, so that callers get BadRequest field violations they can act on.

use chrono::TimeDelta;
use uuid::Uuid;

use super::command::{
    ClaimCommand, CompleteCommand, FailCommand, FailDisposition, ReconcileCommand, RenewCommand,
    Resolution,
};
use super::error::{Error, FieldViolation, Result};
use super::fingerprint;
use super::model::{ErrorReport, Fence, Fingerprint, Metadata, OperationId, Scope, SuccessResult};
use super::query::{HistoryPage, Target, UnresolvedQuery};
use super::requested::{
    ClaimRequested, CompleteRequested, FailRequested, ReconcileRequested, RenewRequested,
    RequestIdentity, UnresolvedRequested,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub max_key_bytes: usize,
    pub max_operation_chars: usize,
    pub max_claim_token_bytes: usize,
    /// Bounds `json_payload` and `bytes_payload` before they are parsed or
    /// hashed: canonicalizing JSON costs many times the document's size.
    pub max_payload_bytes: usize,
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
    pub default_history_page_size: u32,
    pub max_history_page_size: u32,
    pub max_wait: TimeDelta,
    /// Added to the deadlines that decide whether an earlier attempt may
    /// still be in flight ([`crate::domain::ClaimCommand::clock_margin`]).
    pub clock_margin: TimeDelta,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_key_bytes: 255,
            max_operation_chars: 128,
            max_claim_token_bytes: 64,
            max_payload_bytes: 64 * 1024,
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
            default_history_page_size: 100,
            max_history_page_size: 1000,
            max_wait: TimeDelta::seconds(30),
            clock_margin: TimeDelta::seconds(3),
        }
    }
}

/// What protobuf framing (tags, length prefixes, map entries) and the
/// fixed-size fields (ids, fences, durations, enums) of one request can add
/// to its variable-size fields, with room to spare: the fixed fields of the
/// largest request take well under 1 KiB.
const REQUEST_FRAMING_SLACK_BYTES: usize = 16 * 1024;

impl Limits {
    /// The decode limit: no legal request of any method is longer. Counted
    /// as if one request carried every variable-size field at its bound (a
    /// result with its content type and metadata, an error report with its
    /// metadata, a payload, a scope and a claim token), plus
    /// [`REQUEST_FRAMING_SLACK_BYTES`]. Real requests carry a subset, so the
    /// bound is generous yet still a small multiple of the result bound.
    pub fn max_request_bytes(&self) -> usize {
        let metadata = self
            .max_metadata_entries
            .saturating_mul(self.max_metadata_entry_bytes);
        let result = self
            .max_result_bytes
            .saturating_add(self.max_content_type_bytes)
            .saturating_add(metadata);
        let error = self
            .max_error_code_bytes
            .saturating_add(self.max_error_message_bytes)
            .saturating_add(metadata);
        let claim = self
            .max_payload_bytes
            .saturating_add(self.max_key_bytes)
            // Operation names are ASCII: one byte a character.
            .saturating_add(self.max_operation_chars)
            .saturating_add(self.max_claim_token_bytes);
        result
            .saturating_add(error)
            .saturating_add(claim)
            .saturating_add(REQUEST_FRAMING_SLACK_BYTES)
    }

    /// The encode limit. A response carries at most one result (Claim's
    /// replay, Lookup) with a record and its history, or a page of records
    /// without results (ListUnresolved): four times the request bound holds
    /// either with a wide margin, and still bounds what one call can make
    /// the server buffer.
    pub fn max_response_bytes(&self) -> usize {
        self.max_request_bytes().saturating_mul(4)
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

    pub fn into_result(self) -> Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(Error::InvalidArgument(self.0))
        }
    }
}

/// Each command builder takes the `violations` the transport already found
/// in the same request (fields it could not read), so that the answer lists
/// those together with the ones found here.
impl Limits {
    /// The command, and how long the caller is willing to wait for a pending
    /// answer to change.
    pub fn claim(
        &self,
        requested: ClaimRequested,
        mut violations: Violations,
    ) -> Result<(ClaimCommand, TimeDelta)> {
        let scope = self.scope("scope", requested.scope, &mut violations);
        let fingerprint = self.fingerprint_of(requested.identity, &mut violations);
        self.check_claim_token("claim_token", &requested.claim_token, &mut violations);
        let lease = duration_or_default(
            "lease",
            requested.lease,
            self.default_lease,
            (self.min_lease, self.max_lease),
            &mut violations,
        );
        // By default an attempt outlasts its first lease, whatever lease was
        // asked for; asked for both, an attempt shorter than its own lease
        // is a contradiction, refused rather than silently cut short.
        let max_attempt_duration = duration_or_default(
            "max_attempt_duration",
            requested.max_attempt_duration,
            self.default_max_attempt_duration.max(lease),
            (self.min_lease, self.max_attempt_duration),
            &mut violations,
        );
        if let (Some(asked_lease), Some(asked_attempt)) =
            (requested.lease, requested.max_attempt_duration)
            && within(asked_lease, (self.min_lease, self.max_lease))
            && within(asked_attempt, (self.min_lease, self.max_attempt_duration))
            && asked_attempt < asked_lease
        {
            violations.add(
                "max_attempt_duration",
                format!("must be at least the lease ({})", describe(asked_lease)),
            );
        }
        let max_attempts = match requested.max_attempts {
            0 => self.default_max_attempts,
            asked if asked > self.max_attempts => {
                violations.add(
                    "max_attempts",
                    format!("must be at most {}", self.max_attempts),
                );
                asked
            }
            asked => asked,
        };
        let retention = duration_or_default(
            "retention",
            requested.retention,
            self.default_retention,
            (TimeDelta::zero(), self.max_retention),
            &mut violations,
        );
        if let Some(deadline) = requested.operation_deadline {
            check_between(
                "operation_deadline",
                deadline,
                (self.min_lease, self.max_operation_deadline),
                &mut violations,
            );
        }
        // Clamped, never refused: a caller that will wait long takes the
        // server's cap (and the server keeps its bound on waiters).
        let wait = match requested.wait {
            None => TimeDelta::zero(),
            Some(asked) if asked < TimeDelta::zero() => {
                violations.add("wait", "must be a non-negative duration");
                TimeDelta::zero()
            }
            Some(asked) => asked.min(self.max_wait),
        };
        violations.into_result()?;
        let fingerprint = fingerprint
            .ok_or_else(|| Error::Internal("fingerprint missing after validation".into()))?;
        Ok((
            ClaimCommand {
                scope,
                fingerprint,
                claim_token: requested.claim_token,
                lease,
                max_attempt_duration,
                max_attempts,
                retention,
                operation_deadline: requested.operation_deadline,
                clock_margin: self.clock_margin,
            },
            wait,
        ))
    }

    pub fn renew(
        &self,
        requested: RenewRequested,
        mut violations: Violations,
    ) -> Result<RenewCommand> {
        check_fence("fence", requested.fence, &mut violations);
        if let Some(lease) = requested.lease {
            check_between(
                "lease",
                lease,
                (self.min_lease, self.max_lease),
                &mut violations,
            );
        }
        violations.into_result()?;
        Ok(RenewCommand {
            operation_id: requested.operation_id,
            fence: requested.fence,
            lease: requested.lease,
        })
    }

    pub fn complete(
        &self,
        requested: CompleteRequested,
        mut violations: Violations,
    ) -> Result<CompleteCommand> {
        check_fence("fence", requested.fence, &mut violations);
        let result = match requested.result {
            Some(result) => {
                self.check_result("result", &result, &mut violations);
                result
            }
            None => {
                violations.add("result", "is required");
                SuccessResult::default()
            }
        };
        violations.into_result()?;
        Ok(CompleteCommand {
            operation_id: requested.operation_id,
            fence: requested.fence,
            result,
        })
    }

    pub fn fail(
        &self,
        requested: FailRequested,
        mut violations: Violations,
    ) -> Result<FailCommand> {
        check_fence("fence", requested.fence, &mut violations);
        let disposition = requested.disposition.unwrap_or_else(|| {
            violations.add(
                "disposition",
                "must be TERMINAL, RETRYABLE, UNKNOWN or NOT_STARTED",
            );
            FailDisposition::Unknown
        });
        let error = requested.error.unwrap_or_default();
        self.check_error_report("error", &error, &mut violations);
        let retryable = disposition == FailDisposition::Retryable;
        if requested.retry_after.is_some() && !retryable {
            violations.add(
                "retry_after",
                "is only meaningful with disposition RETRYABLE",
            );
        }
        let retry_after = duration_or_default(
            "retry_after",
            requested.retry_after,
            self.default_retry_after,
            (TimeDelta::zero(), self.max_retry_after),
            &mut violations,
        );
        violations.into_result()?;
        Ok(FailCommand {
            operation_id: requested.operation_id,
            fence: requested.fence,
            disposition,
            error,
            retry_after: if retryable {
                retry_after
            } else {
                TimeDelta::zero()
            },
            clock_margin: self.clock_margin,
        })
    }

    pub fn reconcile(
        &self,
        requested: ReconcileRequested,
        mut violations: Violations,
    ) -> Result<ReconcileCommand> {
        check_fence("expected_fence", requested.expected_fence, &mut violations);
        let resolution = match requested.resolution {
            Some(Resolution::Succeeded(result)) => {
                self.check_result("succeeded", &result, &mut violations);
                Resolution::Succeeded(result)
            }
            Some(Resolution::Failed(error)) => {
                self.check_error_report("failed", &error, &mut violations);
                Resolution::Failed(error)
            }
            Some(Resolution::NotApplied) => Resolution::NotApplied,
            None => {
                violations.add(
                    "resolution",
                    "one of succeeded, failed or not_applied is required",
                );
                Resolution::NotApplied
            }
        };
        violations.into_result()?;
        Ok(ReconcileCommand {
            operation_id: requested.operation_id,
            expected_fence: requested.expected_fence,
            resolution,
            clock_margin: self.clock_margin,
        })
    }

    /// What a Lookup addresses; None when the caller named nothing.
    pub fn lookup_target(
        &self,
        requested: Option<Target>,
        mut violations: Violations,
    ) -> Result<Target> {
        let target = match requested {
            Some(Target::Scope(scope)) => {
                self.check_scope("scope", &scope, &mut violations);
                Target::Scope(scope)
            }
            Some(Target::Id(operation_id)) => Target::Id(operation_id),
            None => {
                violations.add("target", "one of scope or operation_id is required");
                Target::Id(OperationId(Uuid::nil()))
            }
        };
        violations.into_result()?;
        Ok(target)
    }

    /// The history page a Lookup asks for: `page_size` 0 is the default,
    /// above the maximum is clamped (never refused); `after` comes from a
    /// validated page token.
    pub fn history_page(&self, page_size: u32, after: Option<(OperationId, u64)>) -> HistoryPage {
        let limit = match page_size {
            0 => self.default_history_page_size,
            size => size.min(self.max_history_page_size),
        };
        HistoryPage {
            after: after.map_or(0, |(_, sequence)| sequence),
            limit,
            of: after.map(|(operation_id, _)| operation_id),
        }
    }

    pub fn unresolved(
        &self,
        requested: UnresolvedRequested,
        mut violations: Violations,
    ) -> Result<UnresolvedQuery> {
        if let Some(operation) = &requested.operation {
            self.check_operation("operation", operation, &mut violations);
        }
        // Clamped, never refused (AIP-158): a larger page only asks for more.
        let limit = match requested.page_size {
            0 => self.default_page_size,
            size => size.min(self.max_page_size),
        };
        violations.into_result()?;
        Ok(UnresolvedQuery {
            operation: requested.operation,
            limit,
            after: requested.after,
        })
    }

    /// The fingerprint the identity names; None (and a violation) when it
    /// names none or an unusable one. Each identity's violation names its own
    /// field. Payloads are measured before anything reads them.
    fn fingerprint_of(
        &self,
        identity: Option<RequestIdentity>,
        violations: &mut Violations,
    ) -> Option<Fingerprint> {
        let payload_too_large = |field: &str, size: usize, violations: &mut Violations| {
            let too_large = size > self.max_payload_bytes;
            if too_large {
                violations.add(
                    field,
                    format!(
                        "must be at most {} bytes (or send a fingerprint instead)",
                        self.max_payload_bytes
                    ),
                );
            }
            too_large
        };
        match identity {
            None => {
                violations.add(
                    "request_identity",
                    "one of fingerprint, json_payload or bytes_payload is required",
                );
                None
            }
            Some(RequestIdentity::Fingerprint(bytes)) => fingerprint::from_client_bytes(&bytes)
                .map_err(|error| violations.add("fingerprint", error.to_string()))
                .ok(),
            Some(RequestIdentity::JsonPayload(document)) => {
                if payload_too_large("json_payload", document.len(), violations) {
                    return None;
                }
                fingerprint::of_json(&document)
                    .map_err(|error| violations.add("json_payload", format!("{error} (RFC 7493)")))
                    .ok()
            }
            Some(RequestIdentity::BytesPayload(bytes)) => {
                if payload_too_large("bytes_payload", bytes.len(), violations) {
                    return None;
                }
                Some(fingerprint::of_bytes(&bytes))
            }
        }
    }

    fn scope(&self, field: &str, scope: Option<Scope>, violations: &mut Violations) -> Scope {
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

    fn check_scope(&self, field: &str, scope: &Scope, violations: &mut Violations) {
        self.check_operation(&format!("{field}.operation"), &scope.operation, violations);
        self.check_key(&format!("{field}.key"), &scope.key, violations);
    }

    fn check_operation(&self, field: &str, operation: &str, violations: &mut Violations) {
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

    fn check_claim_token(&self, field: &str, token: &[u8], violations: &mut Violations) {
        if token.len() > self.max_claim_token_bytes {
            violations.add(
                field,
                format!("must be at most {} bytes", self.max_claim_token_bytes),
            );
        }
    }

    fn check_result(&self, field: &str, result: &SuccessResult, violations: &mut Violations) {
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

    fn check_error_report(&self, field: &str, error: &ErrorReport, violations: &mut Violations) {
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
fn check_fence(field: &str, fence: Fence, violations: &mut Violations) {
    if fence == 0 {
        violations.add(field, "is required (fences start at 1)");
    }
}

/// A duration field: absent means the default; present must lie in bounds.
fn duration_or_default(
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

fn within(value: TimeDelta, (min, max): (TimeDelta, TimeDelta)) -> bool {
    min <= value && value <= max
}

fn check_between(
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
fn describe(duration: TimeDelta) -> String {
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
    use super::*;

    fn claim_requested() -> ClaimRequested {
        ClaimRequested {
            scope: Some(Scope {
                operation: "payments.charge".into(),
                key: "k".into(),
            }),
            identity: Some(RequestIdentity::BytesPayload(b"payload".to_vec())),
            claim_token: Vec::new(),
            lease: None,
            max_attempt_duration: None,
            max_attempts: 0,
            retention: None,
            operation_deadline: None,
            wait: None,
        }
    }

    fn fail_requested(disposition: FailDisposition) -> FailRequested {
        FailRequested {
            operation_id: OperationId(Uuid::nil()),
            fence: 1,
            disposition: Some(disposition),
            error: None,
            retry_after: None,
        }
    }

    fn refused_fields<T: std::fmt::Debug>(result: Result<T>) -> Vec<String> {
        match result {
            Err(Error::InvalidArgument(violations)) => violations
                .into_iter()
                .map(|violation| violation.field)
                .collect(),
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn a_claim_that_leaves_everything_out_gets_the_defaults() {
        let limits = Limits::default();
        let (command, wait) = limits
            .claim(claim_requested(), Violations::default())
            .expect("valid");
        assert_eq!(command.lease, limits.default_lease);
        assert_eq!(
            command.max_attempt_duration,
            limits.default_max_attempt_duration
        );
        assert_eq!(command.max_attempts, limits.default_max_attempts);
        assert_eq!(command.retention, limits.default_retention);
        assert_eq!(command.operation_deadline, None);
        assert_eq!(command.fingerprint, fingerprint::of_bytes(b"payload"));
        assert_eq!(wait, TimeDelta::zero());
    }

    #[test]
    fn max_attempt_duration_defaults_to_outlast_a_lease_longer_than_the_default() {
        let limits = Limits::default();
        let lease = limits.default_max_attempt_duration + TimeDelta::minutes(10);
        let requested = ClaimRequested {
            lease: Some(lease),
            ..claim_requested()
        };
        let (command, _) = limits
            .claim(requested, Violations::default())
            .expect("valid");
        assert_eq!(command.max_attempt_duration, lease);
    }

    #[test]
    fn every_bad_claim_field_is_named_at_once_in_field_order() {
        let limits = Limits::default();
        let requested = ClaimRequested {
            scope: None,
            identity: None,
            claim_token: vec![0; limits.max_claim_token_bytes + 1],
            lease: Some(limits.max_lease + TimeDelta::seconds(1)),
            max_attempt_duration: Some(TimeDelta::zero()),
            max_attempts: limits.max_attempts + 1,
            retention: Some(limits.max_retention + TimeDelta::seconds(1)),
            operation_deadline: Some(TimeDelta::zero()),
            // Above the cap a wait is clamped; only a negative one is refused.
            wait: Some(TimeDelta::seconds(-1)),
        };
        assert_eq!(
            refused_fields(limits.claim(requested, Violations::default())),
            [
                "scope",
                "request_identity",
                "claim_token",
                "lease",
                "max_attempt_duration",
                "max_attempts",
                "retention",
                "operation_deadline",
                "wait"
            ]
        );
    }

    #[test]
    fn violations_the_transport_found_are_answered_with_the_rest() {
        let mut transport = Violations::default();
        transport.add("wait", "must be a non-negative duration");
        let requested = ClaimRequested {
            scope: None,
            ..claim_requested()
        };
        assert_eq!(
            refused_fields(Limits::default().claim(requested, transport)),
            ["wait", "scope"]
        );
    }

    #[test]
    fn bounds_read_in_units_a_caller_would_write() {
        let limits = Limits::default();
        let requested = ClaimRequested {
            lease: Some(TimeDelta::milliseconds(500)),
            ..claim_requested()
        };
        let Err(Error::InvalidArgument(violations)) =
            limits.claim(requested, Violations::default())
        else {
            panic!("a lease below the minimum is refused");
        };
        assert_eq!(
            violations,
            [FieldViolation::new("lease", "must be between 1s and 1h")]
        );
    }

    #[test]
    fn retry_after_without_retryable_is_refused_and_a_retry_waits_the_default() {
        let limits = Limits::default();
        let terminal = FailRequested {
            retry_after: Some(TimeDelta::seconds(5)),
            ..fail_requested(FailDisposition::Terminal)
        };
        assert_eq!(
            refused_fields(limits.fail(terminal, Violations::default())),
            ["retry_after"]
        );
        let unnamed = FailRequested {
            disposition: None,
            ..fail_requested(FailDisposition::Terminal)
        };
        assert_eq!(
            refused_fields(limits.fail(unnamed, Violations::default())),
            ["disposition"]
        );

        let retry = limits
            .fail(
                fail_requested(FailDisposition::Retryable),
                Violations::default(),
            )
            .expect("valid");
        assert_eq!(retry.retry_after, limits.default_retry_after);
        let unknown = limits
            .fail(
                fail_requested(FailDisposition::Unknown),
                Violations::default(),
            )
            .expect("valid");
        assert_eq!(unknown.retry_after, TimeDelta::zero());
    }

    #[test]
    fn a_renewed_lease_must_lie_within_the_lease_bounds() {
        let limits = Limits::default();
        let renew = |lease| RenewRequested {
            operation_id: OperationId(Uuid::nil()),
            fence: 1,
            lease,
        };
        assert_eq!(
            limits
                .renew(renew(None), Violations::default())
                .expect("valid")
                .lease,
            None
        );
        assert_eq!(
            refused_fields(limits.renew(
                renew(Some(limits.max_lease + TimeDelta::seconds(1))),
                Violations::default()
            )),
            ["lease"]
        );
    }

    #[test]
    fn history_page_size_zero_is_the_default_and_above_the_cap_is_clamped() {
        let limits = Limits::default();
        assert_eq!(limits.history_page(0, None).limit, 100);
        assert_eq!(limits.history_page(7, None).limit, 7);
        assert_eq!(limits.history_page(1000, None).limit, 1000);
        assert_eq!(limits.history_page(u32::MAX, None).limit, 1000);
        let operation_id = OperationId(Uuid::nil());
        let page = limits.history_page(10, Some((operation_id, 42)));
        assert_eq!((page.after, page.of), (42, Some(operation_id)));
        assert_eq!(limits.history_page(10, None).after, 0);
    }

    #[test]
    fn page_size_zero_is_the_default_and_above_the_cap_is_clamped() {
        let limits = Limits::default();
        let page = |page_size| UnresolvedRequested {
            operation: None,
            page_size,
            after: None,
        };
        assert_eq!(
            limits
                .unresolved(page(0), Violations::default())
                .expect("valid")
                .limit,
            limits.default_page_size
        );
        assert_eq!(
            limits
                .unresolved(page(limits.max_page_size + 1), Violations::default())
                .expect("clamped, not refused")
                .limit,
            limits.max_page_size
        );
    }

    #[test]
    fn fence_zero_is_a_fence_left_out() {
        let requested = CompleteRequested {
            operation_id: OperationId(Uuid::nil()),
            fence: 0,
            result: None,
        };
        assert_eq!(
            refused_fields(Limits::default().complete(requested, Violations::default())),
            ["fence", "result"]
        );
    }

    fn violations_of<T: std::fmt::Debug>(result: Result<T>) -> Vec<FieldViolation> {
        match result {
            Err(Error::InvalidArgument(violations)) => violations,
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn payloads_are_bounded_before_they_are_parsed() {
        let limits = Limits {
            max_payload_bytes: 16,
            ..Limits::default()
        };
        let with = |identity| ClaimRequested {
            identity: Some(identity),
            ..claim_requested()
        };
        // 16 bytes exactly: a valid document at the bound is fingerprinted.
        let at_the_bound = r#"{"amount":12345}"#;
        assert_eq!(at_the_bound.len(), 16);
        let (command, _) = limits
            .claim(
                with(RequestIdentity::JsonPayload(at_the_bound.into())),
                Violations::default(),
            )
            .expect("at the bound");
        assert_eq!(Ok(command.fingerprint), fingerprint::of_json(at_the_bound));
        // One byte more, and not even JSON: refused for its size alone, so
        // the parser never saw it.
        assert_eq!(
            violations_of(limits.claim(
                with(RequestIdentity::JsonPayload("{".repeat(17))),
                Violations::default()
            )),
            [FieldViolation::new(
                "json_payload",
                "must be at most 16 bytes (or send a fingerprint instead)"
            )]
        );
        assert_eq!(
            refused_fields(limits.claim(
                with(RequestIdentity::BytesPayload(vec![0; 17])),
                Violations::default()
            )),
            ["bytes_payload"]
        );
        limits
            .claim(
                with(RequestIdentity::BytesPayload(vec![0; 16])),
                Violations::default(),
            )
            .expect("at the bound");
        // A client fingerprint is the way to claim for a large request.
        limits
            .claim(
                with(RequestIdentity::Fingerprint(vec![7; 32])),
                Violations::default(),
            )
            .expect("fingerprints are 32 bytes whatever the request's size");
    }

    #[test]
    fn the_default_payload_bound_is_64_kib() {
        assert_eq!(Limits::default().max_payload_bytes, 65_536);
    }

    #[test]
    fn a_wait_above_the_cap_is_clamped_and_a_negative_one_refused() {
        let limits = Limits::default();
        let waiting = |wait| ClaimRequested {
            wait: Some(wait),
            ..claim_requested()
        };
        let (_, wait) = limits
            .claim(waiting(TimeDelta::hours(10)), Violations::default())
            .expect("a long wait is not an error");
        assert_eq!(wait, limits.max_wait);
        let (_, wait) = limits
            .claim(waiting(TimeDelta::seconds(2)), Violations::default())
            .expect("valid");
        assert_eq!(wait, TimeDelta::seconds(2));
        assert_eq!(
            refused_fields(limits.claim(waiting(TimeDelta::seconds(-1)), Violations::default())),
            ["wait"]
        );
    }

    #[test]
    fn an_attempt_shorter_than_its_own_lease_is_refused() {
        let limits = Limits::default();
        let asked = |lease, max_attempt_duration| ClaimRequested {
            lease: Some(lease),
            max_attempt_duration: Some(max_attempt_duration),
            ..claim_requested()
        };
        assert_eq!(
            violations_of(limits.claim(
                asked(TimeDelta::minutes(10), TimeDelta::minutes(2)),
                Violations::default()
            )),
            [FieldViolation::new(
                "max_attempt_duration",
                "must be at least the lease (10m)"
            )]
        );
        let (command, _) = limits
            .claim(
                asked(TimeDelta::minutes(10), TimeDelta::minutes(10)),
                Violations::default(),
            )
            .expect("an attempt as long as its lease");
        assert_eq!(command.max_attempt_duration, TimeDelta::minutes(10));
        // Only the attempt given, shorter than the default lease: the lease
        // is the server's choice, so it is cut to the attempt, not refused.
        let only_attempt = ClaimRequested {
            max_attempt_duration: Some(TimeDelta::seconds(10)),
            ..claim_requested()
        };
        limits
            .claim(only_attempt, Violations::default())
            .expect("the default lease gives way");
    }

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
