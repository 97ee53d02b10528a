//! Complete: a fence and a result within the result bounds.

use super::fields::check_fence;
use crate::command::CompleteCommand;
use crate::error::{Result, Violations};
use crate::limits::Limits;
use crate::model::SuccessResult;
use crate::requested::CompleteRequested;

impl Limits {
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
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use crate::admit::testing::refused_fields;
    use crate::error::Violations;
    use crate::limits::Limits;
    use crate::model::OperationId;
    use crate::requested::CompleteRequested;

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
}
