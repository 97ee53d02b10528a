//! Lookup: what it addresses, and the page of history it asks for.

use uuid::Uuid;

use crate::error::{Result, Violations};
use crate::limits::Limits;
use crate::model::OperationId;
use crate::query::{HistoryPage, Target};

impl Limits {
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
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use crate::limits::Limits;
    use crate::model::OperationId;

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
}
