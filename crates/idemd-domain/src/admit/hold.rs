//! Hold and Release: an operation name (or the whole tenant), a reason the
//! audit log keeps, and what a held Claim is told to wait.

use chrono::TimeDelta;

use super::fields::check_between;
use crate::command::HoldCommand;
use crate::error::{Result, Violations};
use crate::limits::Limits;
use crate::requested::HoldRequested;

/// What a held Claim is told to wait, by default.
pub const DEFAULT_HELD_RETRY_AFTER: TimeDelta = TimeDelta::seconds(30);

impl Limits {
    pub fn hold(&self, requested: HoldRequested, violations: Violations) -> Result<HoldCommand> {
        self.hold_or_release(
            requested,
            violations,
            "duplicates still occur, requests stuck",
        )
    }

    /// A release: the same fields, its `retry_after` unused.
    pub fn release(&self, requested: HoldRequested, violations: Violations) -> Result<HoldCommand> {
        self.hold_or_release(requested, violations, "drained and reconciled")
    }

    fn hold_or_release(
        &self,
        requested: HoldRequested,
        mut violations: Violations,
        examples: &str,
    ) -> Result<HoldCommand> {
        let operation = (!requested.operation.is_empty()).then_some(requested.operation);
        if let Some(operation) = &operation {
            self.check_operation("operation", operation, &mut violations);
        }
        let reason = self.admin_reason(&requested.reason, examples, &mut violations);
        let retry_after = requested.retry_after.unwrap_or(DEFAULT_HELD_RETRY_AFTER);
        if requested.retry_after.is_some() {
            check_between(
                "retry_after",
                retry_after,
                (TimeDelta::milliseconds(1), self.max_retry_after),
                &mut violations,
            );
        }
        violations.into_result()?;
        Ok(HoldCommand {
            operation,
            reason,
            retry_after,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admit::testing::refused_fields;

    fn requested(operation: &str, reason: &str, retry_after: Option<TimeDelta>) -> HoldRequested {
        HoldRequested {
            operation: operation.into(),
            reason: reason.into(),
            retry_after,
        }
    }

    #[test]
    fn a_hold_names_an_operation_or_the_whole_tenant_with_a_reason() {
        let limits = Limits::default();
        let one = limits
            .hold(
                requested("payments.charge", " duplicates seen ", None),
                Violations::default(),
            )
            .expect("valid");
        assert_eq!(
            one,
            HoldCommand {
                operation: Some("payments.charge".into()),
                reason: "duplicates seen".into(),
                retry_after: DEFAULT_HELD_RETRY_AFTER,
            }
        );
        let all = limits
            .hold(
                requested("", "incident 42", Some(TimeDelta::minutes(5))),
                Violations::default(),
            )
            .expect("valid");
        assert_eq!(
            (all.operation, all.retry_after),
            (None, TimeDelta::minutes(5))
        );
    }

    #[test]
    fn a_bad_name_reason_or_retry_after_is_refused_by_field() {
        let limits = Limits::default();
        assert_eq!(
            refused_fields(limits.hold(
                requested("payments charge!", "", Some(TimeDelta::hours(2))),
                Violations::default()
            )),
            ["operation", "reason", "retry_after"]
        );
        assert_eq!(
            refused_fields(
                limits.release(requested("x", "two\nlines", None), Violations::default())
            ),
            ["reason"]
        );
    }
}
