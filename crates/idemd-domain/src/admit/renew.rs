//! Renew: a fence, and a lease within the lease bounds when one is asked for.

use super::fields::{check_between, check_fence};
use crate::command::RenewCommand;
use crate::error::{Result, Violations};
use crate::limits::Limits;
use crate::requested::RenewRequested;

impl Limits {
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
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;
    use uuid::Uuid;

    use crate::admit::testing::refused_fields;
    use crate::error::Violations;
    use crate::limits::Limits;
    use crate::model::OperationId;
    use crate::requested::RenewRequested;

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
}
