//! Who a call is from: a tenant, the scopes its credential holds, and which
//! credential it was. Admission puts one in every API call's extensions;
//! handlers take the tenant from it and nothing from the request body.
//! Bearer tokens and client certificates both end here, so what follows
//! (scopes, per-tenant limits, audit) does not care which one a caller used.

use std::fmt;
use std::sync::Arc;

use super::scopes::{Scope, Scopes};
use crate::domain::{Error, TenantId};

/// The credential a call was made with, by name: never a secret.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CredentialRef {
    /// A bearer token, by the name it was created with.
    Token { name: Arc<str> },
    /// A client certificate, by the identity (SAN URI or DNS name) the
    /// mapping matched.
    Certificate { identity: Arc<str> },
}

impl fmt::Display for CredentialRef {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialRef::Token { name } => write!(formatter, "token:{name}"),
            CredentialRef::Certificate { identity } => write!(formatter, "certificate:{identity}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub tenant: TenantId,
    pub scopes: Scopes,
    pub credential: CredentialRef,
}

impl Principal {
    pub fn token(tenant: TenantId, scopes: Scopes, name: impl Into<Arc<str>>) -> Self {
        Self {
            tenant,
            scopes,
            credential: CredentialRef::Token { name: name.into() },
        }
    }

    /// A principal from a certificate mapping; the tenant is resolved by
    /// [`super::Authenticator::certificate_principal`].
    pub fn certificate(tenant: TenantId, scopes: Scopes, identity: impl Into<Arc<str>>) -> Self {
        Self {
            tenant,
            scopes,
            credential: CredentialRef::Certificate {
                identity: identity.into(),
            },
        }
    }

    /// Admits a call that needs any one of `any_of`; otherwise PERMISSION_DENIED
    /// `MISSING_SCOPE` naming the first of them. No scope needed: admitted.
    pub fn require_any(&self, any_of: &[Scope]) -> Result<(), Error> {
        match any_of.first() {
            None => Ok(()),
            Some(_) if any_of.iter().any(|scope| self.scopes.contains(*scope)) => Ok(()),
            Some(first) => Err(Error::MissingScope {
                scope: first.as_str(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_needs_one_of_its_scopes_and_is_told_the_first_it_lacks() {
        let reconciler = Principal::token(TenantId(1), Scopes::of(&[Scope::Reconcile]), "ops");
        assert!(reconciler.require_any(&[Scope::Reconcile]).is_ok());
        assert!(
            reconciler
                .require_any(&[Scope::Operations, Scope::Reconcile])
                .is_ok()
        );
        assert!(reconciler.require_any(&[]).is_ok());
        assert_eq!(
            reconciler.require_any(&[Scope::Operations]),
            Err(Error::MissingScope {
                scope: "operations"
            })
        );
        let admin = Principal::certificate(TenantId(1), Scopes::of(&[Scope::Admin]), "spiffe://x");
        assert_eq!(
            admin.require_any(&[Scope::Operations, Scope::Reconcile]),
            Err(Error::MissingScope {
                scope: "operations"
            })
        );
    }
}
