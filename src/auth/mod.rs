//! Bearer tokens: generated once, stored only as SHA-256 hashes, each mapped
//! to a tenant with a name, scopes and an optional expiry. The principal of
//! a call (tenant, scopes, credential) comes from here and never from its
//! body ([`principal`]; what each RPC needs: [`scopes`]).
//!
//! Revocation and expiry reach every replica within the cache's TTL
//! ([`AuthSettings::cache_ttl`], 5 s): a verdict is trusted for at most that
//! long, and never past the token's own expiry. A token's `last_used_at` is
//! written without a write per call: the authenticator remembers which tokens
//! it saw and [`Authenticator::record_last_used_every`] writes them in one
//! transaction a minute, so it is exact to about a minute plus the TTL.
//!
//! A flood of bogus tokens must not reach the database: a token of the wrong
//! shape is refused by its shape alone, an unknown one is remembered (briefly,
//! in a bounded cache) as unknown, concurrent calls with one token share one
//! lookup, and lookups in flight are bounded, so they cannot take the pool
//! from real work.
//!
//! Nor may such a flood queue real tenants' calls behind it while the
//! database is slow: a lookup waits in a small queue of its own
//! ([`AuthSettings::lookup_queue`], for at most
//! [`AuthSettings::lookup_queue_timeout`]) and is answered UNAVAILABLE with
//! RetryInfo when the queue is full or the wait too long; and a token this
//! replica has seen granted is looked up again (when its cached verdict
//! expires) in a lane of its own, which tokens never granted cannot enter.

pub mod certificate;
pub mod identities;
pub mod principal;
pub mod scopes;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::warn;

pub use certificate::PeerCertificate;
pub use identities::{IdentityMap, MappedIdentity};
pub use principal::{CredentialRef, Principal};
pub use scopes::{Scope, Scopes};

use crate::domain::{Error, Result, TenantId, model::hex};
use crate::metrics::Metrics;
use crate::store::{Store, TokenGrant};

/// How often the tokens seen are written as used: `last_used_at`'s
/// resolution, and at most one write transaction a minute per replica.
pub const LAST_USED_INTERVAL: Duration = Duration::from_secs(60);

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
    /// Store lookups in flight at once, in each of the two lanes (tokens
    /// seen granted before, and the others); more calls with uncached
    /// tokens wait.
    pub lookup_concurrency: usize,
    /// Calls that may wait for a lookup in each lane; past it they are
    /// answered UNAVAILABLE at once.
    pub lookup_queue: usize,
    /// Longest a call waits for its turn to look up.
    pub lookup_queue_timeout: Duration,
}

impl Default for AuthSettings {
    fn default() -> Self {
        Self {
            cache_ttl: Duration::from_secs(5),
            negative_cache_ttl: Duration::from_secs(5),
            cache_entries: 10_000,
            lookup_concurrency: 4,
            lookup_queue: 16,
            lookup_queue_timeout: Duration::from_millis(250),
        }
    }
}

/// A token the store accepted, as this replica remembers it.
#[derive(Debug)]
struct Grant {
    principal: Principal,
    /// Whether this grant has been counted as used since it was cached: the
    /// first call per cached grant puts its hash in the used set, the others
    /// cost one atomic load.
    counted: AtomicBool,
}

/// What the store said about a token hash (what it grants, or that it knows
/// none), and until when that is trusted.
type Verdict = (Option<Arc<Grant>>, Instant);

/// How long a call refused a lookup turn is told to wait: the queue drains
/// at the database's pace.
const LOOKUP_RETRY_AFTER: Duration = Duration::from_millis(200);

/// Lookups in the store, bounded: `concurrency` at once, at most `queue`
/// more waiting, each for at most the queue timeout.
struct LookupLane {
    turns: Semaphore,
    /// Calls holding or waiting for a turn.
    entered: std::sync::atomic::AtomicUsize,
    /// Turns plus waiting places.
    capacity: usize,
}

impl LookupLane {
    fn new(concurrency: usize, queue: usize) -> Self {
        let concurrency = concurrency.max(1);
        Self {
            turns: Semaphore::new(concurrency),
            entered: std::sync::atomic::AtomicUsize::new(0),
            capacity: concurrency.saturating_add(queue),
        }
    }
}

/// A call's place in a lane, given up when dropped.
struct LanePlace<'a>(&'a LookupLane);

impl Drop for LanePlace<'_> {
    fn drop(&mut self) {
        self.0.entered.fetch_sub(1, Ordering::AcqRel);
    }
}

fn lookups_saturated(what: &str) -> Error {
    Error::Unavailable {
        reason: format!("authentication lookups are {what}"),
        retry_after: LOOKUP_RETRY_AFTER,
    }
}

/// Resolves tokens to principals, caching answers briefly so the hot path
/// does not pay a database round trip per call.
#[derive(Clone)]
pub struct Authenticator {
    store: Arc<dyn Store>,
    cache: Arc<quick_cache::sync::Cache<[u8; 32], Verdict>>,
    /// Certificate mappings name tenants: tenant name -> id, cached as
    /// tokens are.
    tenants: Arc<quick_cache::sync::Cache<String, (Option<TenantId>, Instant)>>,
    /// Lookups of tokens never seen granted here (and of tenant names).
    lookups: Arc<LookupLane>,
    /// Lookups again of tokens this replica has seen granted.
    known_lookups: Arc<LookupLane>,
    /// Hashes of the tokens seen granted: kept apart from the verdict cache
    /// so that a flood of unknown tokens cannot evict them.
    known: Arc<quick_cache::sync::Cache<[u8; 32], ()>>,
    /// Hashes of the tokens seen since the last write of `last_used_at`.
    used: Arc<Mutex<HashSet<[u8; 32]>>>,
    settings: AuthSettings,
    metrics: Metrics,
}

impl Authenticator {
    pub fn new(store: Arc<dyn Store>, settings: AuthSettings, metrics: Metrics) -> Self {
        Self {
            store,
            cache: Arc::new(quick_cache::sync::Cache::new(settings.cache_entries.max(1))),
            tenants: Arc::new(quick_cache::sync::Cache::new(settings.cache_entries.max(1))),
            lookups: Arc::new(LookupLane::new(
                settings.lookup_concurrency,
                settings.lookup_queue,
            )),
            known_lookups: Arc::new(LookupLane::new(
                settings.lookup_concurrency,
                settings.lookup_queue,
            )),
            known: Arc::new(quick_cache::sync::Cache::new(settings.cache_entries.max(1))),
            used: Arc::default(),
            settings,
            metrics,
        }
    }

    /// The principal for an `authorization` header value (`Bearer <token>`).
    pub async fn principal(&self, authorization: Option<&str>) -> Result<Principal> {
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
        let grant = self.grant(hash).await?.ok_or(Error::Unauthenticated)?;
        if !grant.counted.swap(true, Ordering::Relaxed) {
            self.remember_used(hash);
        }
        Ok(grant.principal.clone())
    }

    /// A principal for a client certificate whose identity a configured
    /// mapping matched to `tenant_name` with `scopes`: UNAUTHENTICATED when
    /// no active tenant has that name (revoked since the mapping was
    /// written). The tenant is looked up by name and cached as tokens are.
    pub async fn certificate_principal(
        &self,
        tenant_name: &str,
        scopes: Scopes,
        identity: &str,
    ) -> Result<Principal> {
        let now = Instant::now();
        let cached = self
            .tenants
            .get(tenant_name)
            .filter(|(_, until)| now < *until);
        let tenant = match cached {
            Some((tenant, _)) => tenant,
            None => {
                let found = self
                    .lookup(&self.lookups, |store| store.tenant_by_name(tenant_name))
                    .await?;
                let ttl = if found.is_some() {
                    self.settings.cache_ttl
                } else {
                    self.settings.negative_cache_ttl
                };
                self.tenants
                    .insert(tenant_name.to_owned(), (found, Instant::now() + ttl));
                found
            }
        };
        let tenant = tenant.ok_or(Error::Unauthenticated)?;
        Ok(Principal::certificate(tenant, scopes, identity))
    }

    /// What the token of `hash` grants, from the cache while it is trusted.
    async fn grant(&self, hash: [u8; 32]) -> Result<Option<Arc<Grant>>> {
        let now = Instant::now();
        match self.cache.get(&hash) {
            Some((grant, until)) if now < until => return Ok(grant),
            Some(_) => {
                self.cache.remove_if(&hash, |(_, until)| *until <= now);
            }
            None => {}
        }
        // Concurrent calls with the same uncached token wait for the first
        // one's lookup instead of making their own.
        let guard = match self.cache.get_value_or_guard_async(&hash).await {
            Ok((grant, _)) => return Ok(grant),
            Err(guard) => guard,
        };
        // A store error is not an answer: nothing is cached, and a waiting
        // call looks up itself.
        let lane = if self.known.get(&hash).is_some() {
            &self.known_lookups
        } else {
            &self.lookups
        };
        let found = self.lookup(lane, |store| store.authenticate(&hash)).await?;
        let (grant, ttl) = match found {
            Some(found) => {
                self.known.insert(hash, ());
                let ttl = trusted_for(&found, self.settings.cache_ttl);
                (Some(Arc::new(grant_of(found))), ttl)
            }
            None => (None, self.settings.negative_cache_ttl),
        };
        let _ = guard.insert((grant.clone(), Instant::now() + ttl));
        Ok(grant)
    }

    /// One store lookup in `lane`, within its bounds on lookups in flight
    /// and waiting.
    async fn lookup<'a, T, F>(
        &'a self,
        lane: &LookupLane,
        call: impl FnOnce(&'a dyn Store) -> F,
    ) -> Result<T>
    where
        F: Future<Output = Result<T>> + 'a,
    {
        if lane.entered.fetch_add(1, Ordering::AcqRel) >= lane.capacity {
            lane.entered.fetch_sub(1, Ordering::AcqRel);
            return Err(lookups_saturated("queued full"));
        }
        let _place = LanePlace(lane);
        let turn = tokio::time::timeout(self.settings.lookup_queue_timeout, lane.turns.acquire());
        let _permit = turn
            .await
            .map_err(|_| lookups_saturated("too slow to wait for"))?
            .map_err(|_| Error::Internal("the authentication semaphore closed".into()))?;
        let started = Instant::now();
        let found = call(self.store.as_ref()).await;
        self.metrics
            .store_latency("authenticate", started.elapsed());
        found
    }

    fn remember_used(&self, hash: [u8; 32]) {
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        // Bounded like the cache: past it, a use is recorded a minute later.
        if used.len() < self.settings.cache_entries.max(1) {
            used.insert(hash);
        }
    }

    /// Writes `last_used_at` for the tokens seen since the last time, in one
    /// store call. On a store error they are kept for the next round.
    pub async fn record_last_used(&self) -> Result<()> {
        let seen: Vec<[u8; 32]> = self
            .used
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .collect();
        if seen.is_empty() {
            return Ok(());
        }
        let written = self.store.record_tokens_used(&seen).await;
        if written.is_err() {
            self.used
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend(seen);
        }
        written
    }

    /// Records the tokens used every `interval` until `stop`, and once more
    /// then, so a drained replica does not lose its last minute.
    pub async fn record_last_used_every(self, interval: Duration, stop: CancellationToken) {
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            let stopping = tokio::select! {
                _ = ticks.tick() => false,
                () = stop.cancelled() => true,
            };
            if let Err(error) = self.record_last_used().await {
                warn!(%error, "could not record which tokens were used");
            }
            if stopping {
                return;
            }
        }
    }
}

/// How long a store's yes is trusted: the cache TTL, and never past the
/// token's expiry (by the database's clock, counted from the lookup).
fn trusted_for(grant: &TokenGrant, cache_ttl: Duration) -> Duration {
    grant
        .expires_in
        .map_or(cache_ttl, |expires_in| expires_in.min(cache_ttl))
}

fn grant_of(found: TokenGrant) -> Grant {
    Grant {
        principal: Principal::token(found.tenant, Scopes::from_stored(&found.scopes), found.name),
        counted: AtomicBool::new(false),
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

    #[test]
    fn a_grant_is_trusted_for_the_ttl_and_never_past_its_expiry() {
        let grant = |expires_in| TokenGrant {
            tenant: TenantId(1),
            name: "ci".into(),
            scopes: "operations".into(),
            expires_in,
        };
        let ttl = Duration::from_secs(5);
        assert_eq!(trusted_for(&grant(None), ttl), ttl);
        assert_eq!(
            trusted_for(&grant(Some(Duration::from_millis(300))), ttl),
            Duration::from_millis(300)
        );
        assert_eq!(trusted_for(&grant(Some(Duration::from_secs(60))), ttl), ttl);
    }
}
