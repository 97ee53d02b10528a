//! Reconcile: the fence the reconciler expects, and one resolution whose
//! result or error report lies within the bounds an owner's would.

use super::fields::check_fence;
use crate::command::{ReconcileCommand, Resolution};
use crate::error::{Result, Violations};
use crate::limits::Limits;
use crate::requested::ReconcileRequested;

impl Limits {
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
}
