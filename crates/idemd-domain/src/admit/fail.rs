//! Fail: a fence, a disposition, an error report within its bounds, and a
//! retry delay only for a RETRYABLE failure.

use chrono::TimeDelta;

use super::fields::{check_fence, duration_or_default};
use crate::command::{FailCommand, FailDisposition};
use crate::error::{Result, Violations};
use crate::limits::Limits;
use crate::requested::FailRequested;

impl Limits {
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
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use crate::admit::testing::{fail_requested, refused_fields};
    use crate::command::FailDisposition;
    use crate::error::Violations;
    use crate::limits::Limits;
    use crate::requested::FailRequested;

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
}
