//! GetPolicy: an operation name as a Claim's scope would give it.

use crate::error::{Result, Violations};
use crate::limits::Limits;

impl Limits {
    /// The operation name a GetPolicy asks about, checked as a Claim's.
    pub fn policy_operation(&self, operation: String) -> Result<String> {
        let mut violations = Violations::default();
        self.check_operation("operation", &operation, &mut violations);
        violations.into_result()?;
        Ok(operation)
    }
}
