//! ListUnresolved: an operation name to filter by, and a page size that is
//! clamped, never refused.

use crate::error::{Result, Violations};
use crate::limits::Limits;
use crate::query::UnresolvedQuery;
use crate::requested::UnresolvedRequested;

impl Limits {
    /// A listing's page size (ListUnresolved, ListOperations): 0 is the
    /// default; clamped, never refused (AIP-158): a larger page only asks
    /// for more.
    pub fn page_size(&self, requested: u32) -> u32 {
        match requested {
            0 => self.default_page_size,
            size => size.min(self.max_page_size),
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
        let limit = self.page_size(requested.page_size);
        violations.into_result()?;
        Ok(UnresolvedQuery {
            operation: requested.operation,
            limit,
            after: requested.after,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::error::Violations;
    use crate::limits::Limits;
    use crate::requested::UnresolvedRequested;

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
}
