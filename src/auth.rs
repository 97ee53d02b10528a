//! Bearer tokens: generated once, stored only as SHA-256 hashes, mapped to a
//! tenant. The tenant of a call comes from here and never from its body.
//!
//! A flood of bogus tokens must not reach the database: a token of the wrong
//! shape is refused by its shape alone, an unknown one is remembered (briefly,
//! in a bounded cache) as unknown, concurrent calls with one token share one
//! lookup, and lookups in flight are bounded, so they cannot take the pool
//! from real work.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use crate::domain::{Error, Result, TenantId, model::hex};
use crate::metrics::Metrics;
use crate::store::Store;

/// Prefix that makes leaked tokens easy to recognise by secret scanners.
const TOKEN_PREFIX: &str = "idem_";
/// Bytes of randomness in a token; written as twice as many hex digits.
const TOKEN_SECRET_BYTES: usize = 32;

pub fn generate_token() -> Result<String> {
    let mut secret = [0u8; TOKEN_SECRET_BYTES];
    getrandom::fill(&mut secret)
        .map_err(|error| Error::Internal(format!("no randomness for a token: {error}")))?;
    Ok(format!("{TOKEN_PREFIX}{}", hex(&secret)))
}

pub fn token_sha256(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Whether `token` has the shape [`generate_token`] gives every token:
/// `idem_` and 64 lowercase hex digits. No other string can be a token.
pub fn is_well_formed(token: &str) -> bool {
    token.strip_prefix(TOKEN_PREFIX).is_some_and(|secret| {
        secret.len() == TOKEN_SECRET_BYTES * 2
            && secret
                .bytes()
                .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
    })
}

/// The token of `Bearer <token>`; None for another scheme or an empty token.
fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSettings {
    /// How long a token the store accepted is trusted; a revocation takes
    /// effect within it.
    pub cache_ttl: Duration,
    /// How long a well-formed token the store did not know is refused
    /// without asking again.
    pub negative_cache_ttl: Duration,
    /// Tokens remembered, known and unknown together.
    pub cache_entries: usize,
    /// Store lookups in flight at once; more calls with uncached tokens wait.
    pub lookup_concurrency: usize,
}

impl Default for AuthSettings {
    fn default() -> Self {
        Self {
            cache_ttl: Duration::from_secs(5),
            negative_cache_ttl: Duration::from_secs(5),
            cache_entries: 10_000,
            lookup_concurrency: 4,
        }
    }
}

/// What the store said about a token hash (its tenant, or that it knows
/// none), and until when that is trusted.
type Verdict = (Option<TenantId>, Instant);

/// Resolves tokens to tenants, caching answers briefly so the hot path does
/// not pay a database round trip per call.
#[derive(Clone)]
pub struct Authenticator {
    store: Arc<dyn Store>,
    cache: Arc<quick_cache::sync::Cache<[u8; 32], Verdict>>,
    lookups: Arc<Semaphore>,
    settings: AuthSettings,
    metrics: Metrics,
}

impl Authenticator {
    pub fn new(store: Arc<dyn Store>, settings: AuthSettings, metrics: Metrics) -> Self {
        Self {
            store,
            cache: Arc::new(quick_cache::sync::Cache::new(settings.cache_entries.max(1))),
            lookups: Arc::new(Semaphore::new(settings.lookup_concurrency.max(1))),
            settings,
            metrics,
        }
    }

    /// The tenant for an `authorization` header value (`Bearer <token>`).
    pub async fn tenant(&self, authorization: Option<&str>) -> Result<TenantId> {
        // Told apart because a caller that sends nothing is misconfigured,
        // while one whose token is refused may have been revoked.
        let authorization = authorization
            .map(str::trim)
            .filter(|value| !value.is_empty())
            .ok_or(Error::MissingCredentials)?;
        let token = bearer_token(authorization).ok_or(Error::Unauthenticated)?;
        if !is_well_formed(token) {
            return Err(Error::Unauthenticated);
        }
        let hash = token_sha256(token);
        let now = Instant::now();
        match self.cache.get(&hash) {
            Some((tenant, until)) if now < until => return tenant.ok_or(Error::Unauthenticated),
            Some(_) => {
                self.cache.remove_if(&hash, |(_, until)| *until <= now);
            }
            None => {}
        }
        // Concurrent calls with the same uncached token wait for the first
        // one's lookup instead of making their own.
        let guard = match self.cache.get_value_or_guard_async(&hash).await {
            Ok((tenant, _)) => return tenant.ok_or(Error::Unauthenticated),
            Err(guard) => guard,
        };
        let tenant = {
            let _permit = self
                .lookups
                .acquire()
                .await
                .map_err(|_| Error::Internal("the authentication semaphore closed".into()))?;
            let started = std::time::Instant::now();
            let found = self.store.authenticate(&hash).await;
            self.metrics
                .store_latency("authenticate", started.elapsed());
            // A store error is not an answer: nothing is cached, and a
            // waiting call looks up itself.
            found?
        };
        let ttl = match tenant {
            Some(_) => self.settings.cache_ttl,
            None => self.settings.negative_cache_ttl,
        };
        let _ = guard.insert((tenant, Instant::now() + ttl));
        tenant.ok_or(Error::Unauthenticated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_are_well_formed_and_nothing_else_is() {
        let token = generate_token().expect("a token");
        assert!(is_well_formed(&token));
        for bogus in [
            "",
            "idem_",
            "nope",
            &token[1..],
            &format!("{token}0"),
            &token.to_uppercase(),
            &token.replace("idem_", "idem-"),
            &format!("idem_{}", "g".repeat(64)),
            &format!("idem_{}", "é".repeat(32)),
        ] {
            assert!(!is_well_formed(bogus), "{bogus}");
        }
    }
}
