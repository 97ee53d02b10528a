//! Forget: the fence the admin expects, and a reason the history and the
//! audit log can keep.

use super::fields::check_fence;
use crate::command::ForgetCommand;
use crate::error::{Result, Violations};
use crate::limits::Limits;
use crate::requested::ForgetRequested;

impl Limits {
    pub fn forget(
        &self,
        requested: ForgetRequested,
        mut violations: Violations,
    ) -> Result<ForgetCommand> {
        check_fence("expected_fence", requested.expected_fence, &mut violations);
        let reason = self.admin_reason(
            &requested.reason,
            "a deletion request, a poisoned result",
            &mut violations,
        );
        violations.into_result()?;
        Ok(ForgetCommand {
            operation_id: requested.operation_id,
            expected_fence: requested.expected_fence,
            reason,
            tombstone_retention: self.tombstone_retention,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::OperationId;

    fn requested(reason: &str) -> ForgetRequested {
        ForgetRequested {
            operation_id: OperationId(uuid::Uuid::nil()),
            expected_fence: 3,
            reason: reason.into(),
        }
    }

    fn refused_fields(reason: &str) -> Vec<String> {
        match Limits::default().forget(requested(reason), Violations::default()) {
            Err(crate::Error::InvalidArgument(violations)) => violations
                .into_iter()
                .map(|violation| violation.field)
                .collect(),
            other => panic!("expected INVALID_ARGUMENT, got {other:?}"),
        }
    }

    #[test]
    fn a_reason_is_required_bounded_and_one_line() {
        assert_eq!(refused_fields(""), ["reason"]);
        assert_eq!(refused_fields("   "), ["reason"]);
        assert_eq!(refused_fields(&"x".repeat(513)), ["reason"]);
        assert_eq!(refused_fields("first\nsecond"), ["reason"]);
        let command = Limits::default()
            .forget(requested("  GDPR erasure #42 "), Violations::default())
            .expect("a valid reason");
        assert_eq!(command.reason, "GDPR erasure #42");
        assert_eq!(
            command.tombstone_retention,
            Limits::default().tombstone_retention
        );
    }
}
