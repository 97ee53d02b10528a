//! What a credential may do. Each RPC needs one of a few scopes; a
//! credential holds a set of them. The set is stored as the comma-separated
//! names ([`Scopes`]'s `Display`), so a database row reads as what it means.

use std::fmt;

/// One permission a credential may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Claim, Renew, Complete, Fail, Lookup: a service doing its effects.
    Operations,
    /// Reconcile, ListUnresolved, Lookup: a person or job settling what a
    /// caller could not.
    Reconcile,
    /// The operator surface (tenants, credentials, cross-tenant views). It
    /// grants nothing of the other two by itself: an admin that reconciles
    /// holds `reconcile` too, so its reach is as visible as anyone's.
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 3] = [Scope::Operations, Scope::Reconcile, Scope::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Operations => "operations",
            Scope::Reconcile => "reconcile",
            Scope::Admin => "admin",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Scope::ALL.into_iter().find(|scope| scope.as_str() == name)
    }

    fn bit(self) -> u8 {
        match self {
            Scope::Operations => 1,
            Scope::Reconcile => 2,
            Scope::Admin => 4,
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// A set of scopes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Scopes(u8);

impl Scopes {
    pub const NONE: Scopes = Scopes(0);
    /// What a tenant's first token gets unless asked otherwise, and what a
    /// token made before scopes existed holds: everything a token could do
    /// then.
    pub const DEFAULT: Scopes = Scopes(1 | 2);

    pub fn of(scopes: &[Scope]) -> Self {
        scopes
            .iter()
            .fold(Scopes::NONE, |set, scope| set.with(*scope))
    }

    #[must_use]
    pub fn with(self, scope: Scope) -> Self {
        Scopes(self.0 | scope.bit())
    }

    pub fn contains(self, scope: Scope) -> bool {
        self.0 & scope.bit() != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL
            .into_iter()
            .filter(move |scope| self.contains(*scope))
    }

    /// `operations,reconcile` as given on the command line or in a file:
    /// known names only, at least one.
    pub fn parse_list(list: &str) -> Result<Self, String> {
        let mut scopes = Scopes::NONE;
        for name in list
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
        {
            let scope = Scope::parse(name).ok_or_else(|| {
                format!("unknown scope `{name}` (known: operations, reconcile, admin)")
            })?;
            scopes = scopes.with(scope);
        }
        if scopes.is_empty() {
            return Err("at least one scope is needed".into());
        }
        Ok(scopes)
    }

    /// The set a stored row holds. A name this binary does not know (a newer
    /// binary wrote it) grants nothing here, rather than refusing the row.
    pub fn from_stored(list: &str) -> Self {
        list.split(',')
            .filter_map(|name| Scope::parse(name.trim()))
            .fold(Scopes::NONE, Scopes::with)
    }
}

impl fmt::Display for Scopes {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(Scope::as_str).collect();
        formatter.write_str(&names.join(","))
    }
}

impl fmt::Debug for Scopes {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "Scopes({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_to_sets_that_print_in_one_order() {
        let scopes = Scopes::parse_list(" reconcile , operations").expect("valid");
        assert_eq!(scopes, Scopes::DEFAULT);
        assert_eq!(scopes.to_string(), "operations,reconcile");
        assert!(!scopes.contains(Scope::Admin));
        assert_eq!(Scopes::from_stored(&scopes.to_string()), scopes);
    }

    #[test]
    fn unknown_and_empty_lists_are_refused_but_stored_unknowns_grant_nothing() {
        assert!(Scopes::parse_list("operations,root").is_err());
        assert!(Scopes::parse_list(" , ").is_err());
        assert_eq!(
            Scopes::from_stored("admin,something-newer"),
            Scopes::of(&[Scope::Admin])
        );
    }
}
