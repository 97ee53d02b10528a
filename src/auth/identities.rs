//! Workload identities: which tenant, with which scopes, a client
//! certificate speaks for. The mapping is a YAML file (`--tls-identities`):
//!
//! ```yaml
//! identities:
//!   - uri: spiffe://prod.example/ns/payments/sa/api
//!     tenant: payments
//!     scopes: [operations]
//!   - uri: spiffe://prod.example/ns/payments/sa/*
//!     tenant: payments
//!     scopes: [reconcile]
//!   - dns: reconciler.internal.example
//!     tenant: payments
//!     scopes: [reconcile]
//! ```
//!
//! A `uri` entry matches a SAN URI exactly, or, ending in `/*`, any URI that
//! is its prefix plus exactly one more non-empty path segment (SPIFFE IDs
//! name a workload by their last segment: a wildcard over a namespace's
//! service accounts must not reach into deeper paths). A `dns` entry matches
//! a SAN DNS name exactly, ignoring ASCII case. An exact entry wins over a
//! wildcard, a longer wildcard over a shorter one; the certificate's SAN
//! URIs are tried before its DNS names, each in certificate order, and the
//! first that matches decides.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;

use super::scopes::{Scope, Scopes};

/// What a matched identity grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedIdentity {
    /// The SAN that matched, as the certificate has it: the credential's name
    /// in the audit log and in logs.
    pub identity: Arc<str>,
    pub tenant: Arc<str>,
    pub scopes: Scopes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Grant {
    tenant: Arc<str>,
    scopes: Scopes,
}

/// The parsed mapping.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct IdentityMap {
    exact_uris: HashMap<String, Grant>,
    /// Wildcard prefixes (with their trailing `/`), longest first.
    uri_prefixes: Vec<(String, Grant)>,
    /// Lowercased.
    dns_names: HashMap<String, Grant>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    identities: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    uri: Option<String>,
    dns: Option<String>,
    tenant: String,
    scopes: Vec<String>,
}

impl IdentityMap {
    /// Parses the YAML mapping; every mistake is refused with the entry it
    /// is in, so that a bad file never half-applies.
    pub fn parse(yaml: &str) -> Result<Self, String> {
        let file: File = serde_norway::from_str(yaml)
            .map_err(|error| format!("not an identity map: {error}"))?;
        let mut map = IdentityMap::default();
        for (index, entry) in file.identities.into_iter().enumerate() {
            let at = |what: String| format!("identities[{index}]: {what}");
            let tenant = entry.tenant.trim();
            if tenant.is_empty() {
                return Err(at("`tenant` is empty".into()));
            }
            if entry.scopes.is_empty() {
                return Err(at(
                    "`scopes` is empty: name operations, reconcile or admin".into()
                ));
            }
            let mut scopes = Scopes::NONE;
            for name in &entry.scopes {
                let scope = Scope::parse(name).ok_or_else(|| {
                    at(format!(
                        "unknown scope {name:?} (operations, reconcile, admin)"
                    ))
                })?;
                scopes = scopes.with(scope);
            }
            let grant = Grant {
                tenant: tenant.into(),
                scopes,
            };
            let duplicate = |name: &str| at(format!("{name} is mapped twice"));
            match (entry.uri, entry.dns) {
                (Some(uri), None) => {
                    if !uri.contains("://") || uri.chars().any(char::is_whitespace) {
                        return Err(at(format!("{uri:?} is not a URI")));
                    }
                    match uri.strip_suffix('*') {
                        Some(prefix) if prefix.ends_with('/') && !prefix.contains('*') => {
                            if map.uri_prefixes.iter().any(|(known, _)| known == prefix) {
                                return Err(duplicate(&uri));
                            }
                            map.uri_prefixes.push((prefix.to_owned(), grant));
                        }
                        _ if uri.contains('*') => {
                            return Err(at(format!(
                                "{uri:?}: `*` may only stand for the last path segment (`…/*`)"
                            )));
                        }
                        _ => {
                            if map.exact_uris.insert(uri.clone(), grant).is_some() {
                                return Err(duplicate(&uri));
                            }
                        }
                    }
                }
                (None, Some(dns)) => {
                    let dns = dns.trim().to_ascii_lowercase();
                    if dns.is_empty() || dns.contains('*') || dns.contains('/') {
                        return Err(at(format!(
                            "{dns:?} is not a DNS name (no wildcards: map each name)"
                        )));
                    }
                    if map.dns_names.insert(dns.clone(), grant).is_some() {
                        return Err(duplicate(&dns));
                    }
                }
                _ => return Err(at("give exactly one of `uri` and `dns`".into())),
            }
        }
        map.uri_prefixes
            .sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
        Ok(map)
    }

    pub fn len(&self) -> usize {
        self.exact_uris.len() + self.uri_prefixes.len() + self.dns_names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The grant for a certificate with these SAN URIs and DNS names.
    pub fn lookup(&self, uris: &[String], dns_names: &[String]) -> Option<MappedIdentity> {
        let mapped = |identity: &str, grant: &Grant| MappedIdentity {
            identity: identity.into(),
            tenant: grant.tenant.clone(),
            scopes: grant.scopes,
        };
        for uri in uris {
            if let Some(grant) = self.exact_uris.get(uri) {
                return Some(mapped(uri, grant));
            }
            let wildcard = self.uri_prefixes.iter().find(|(prefix, _)| {
                uri.strip_prefix(prefix.as_str())
                    .is_some_and(|last| !last.is_empty() && !last.contains('/'))
            });
            if let Some((_, grant)) = wildcard {
                return Some(mapped(uri, grant));
            }
        }
        dns_names.iter().find_map(|name| {
            self.dns_names
                .get(&name.to_ascii_lowercase())
                .map(|grant| mapped(name, grant))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &str = "
identities:
  - uri: spiffe://prod.example/ns/payments/sa/api
    tenant: payments
    scopes: [operations]
  - uri: spiffe://prod.example/ns/payments/sa/*
    tenant: payments
    scopes: [reconcile]
  - uri: spiffe://prod.example/ns/*
    tenant: platform
    scopes: [admin]
  - dns: Reconciler.Internal.example
    tenant: payments
    scopes: [reconcile, operations]
";

    fn uris(list: &[&str]) -> Vec<String> {
        list.iter().map(|uri| (*uri).to_owned()).collect()
    }

    #[test]
    fn exact_beats_wildcard_and_a_wildcard_is_one_segment() {
        let map = IdentityMap::parse(MAP).expect("parses");
        assert_eq!(map.len(), 4);
        let api = map
            .lookup(&uris(&["spiffe://prod.example/ns/payments/sa/api"]), &[])
            .expect("exact");
        assert_eq!(&*api.tenant, "payments");
        assert_eq!(api.scopes, Scopes::of(&[Scope::Operations]));
        let worker = map
            .lookup(&uris(&["spiffe://prod.example/ns/payments/sa/worker"]), &[])
            .expect("wildcard");
        assert_eq!(worker.scopes, Scopes::of(&[Scope::Reconcile]));
        assert_eq!(
            &*worker.identity,
            "spiffe://prod.example/ns/payments/sa/worker"
        );
        // The shorter wildcard matches one segment after `ns/` only.
        let namespace = map
            .lookup(&uris(&["spiffe://prod.example/ns/billing"]), &[])
            .expect("the shorter wildcard");
        assert_eq!(&*namespace.tenant, "platform");
        for unmapped in [
            "spiffe://prod.example/ns/payments/sa/",
            "spiffe://prod.example/ns/payments/sa/api/extra",
            "spiffe://prod.example/ns/billing/sa/api",
            "spiffe://other.example/ns/payments/sa/api",
        ] {
            assert_eq!(map.lookup(&uris(&[unmapped]), &[]), None, "{unmapped}");
        }
    }

    #[test]
    fn dns_names_match_without_case_and_after_uris() {
        let map = IdentityMap::parse(MAP).expect("parses");
        let by_dns = map
            .lookup(&[], &uris(&["reconciler.internal.EXAMPLE"]))
            .expect("dns");
        assert_eq!(
            by_dns.scopes,
            Scopes::of(&[Scope::Reconcile, Scope::Operations])
        );
        let both = map
            .lookup(
                &uris(&["spiffe://prod.example/ns/payments/sa/api"]),
                &uris(&["reconciler.internal.example"]),
            )
            .expect("uri first");
        assert_eq!(both.scopes, Scopes::of(&[Scope::Operations]));
        assert_eq!(map.lookup(&[], &uris(&["other.example"])), None);
    }

    #[test]
    fn mistakes_are_refused_with_their_entry() {
        for (yaml, says) in [
            (
                "identities: [{uri: 'spiffe://a/b', tenant: t, scopes: [write]}]",
                "unknown scope",
            ),
            (
                "identities: [{uri: 'spiffe://a/b', tenant: '', scopes: [admin]}]",
                "`tenant`",
            ),
            (
                "identities: [{uri: 'spiffe://a/b', tenant: t, scopes: []}]",
                "`scopes`",
            ),
            (
                "identities: [{uri: 'spiffe://a/*/c', tenant: t, scopes: [admin]}]",
                "last path",
            ),
            (
                "identities: [{uri: 'spiffe://a/b*', tenant: t, scopes: [admin]}]",
                "last path",
            ),
            (
                "identities: [{uri: 'not a uri', tenant: t, scopes: [admin]}]",
                "not a URI",
            ),
            (
                "identities: [{dns: '*.example', tenant: t, scopes: [admin]}]",
                "no wildcards",
            ),
            ("identities: [{tenant: t, scopes: [admin]}]", "exactly one"),
            (
                "identities: [{uri: 'spiffe://a/b', dns: a, tenant: t, scopes: [admin]}]",
                "exactly one",
            ),
            (
                "identities: [{uri: 'spiffe://a/b', tenant: t, scopes: [admin]}, \
                 {uri: 'spiffe://a/b', tenant: u, scopes: [admin]}]",
                "mapped twice",
            ),
            (
                "identities: [{uri: 'spiffe://a/b', tenant: t, scope: [admin]}]",
                "identity map",
            ),
            ("nothing: here", "identity map"),
        ] {
            let error = IdentityMap::parse(yaml).expect_err(yaml);
            assert!(error.contains(says), "{yaml}: {error}");
        }
    }
}
