//! Bearer tokens: generated once, stored only as SHA-256 hashes, mapped to a
//! tenant. The tenant of a call comes from here and never from its body.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::domain::{Error, Result, TenantId, model::hex};
use crate::store::Store;

/// Prefix that makes leaked tokens easy to recognise by secret scanners.
const TOKEN_PREFIX: &str = "idem_";
/// Bounds the cache's memory when many distinct valid tokens are in use
/// (only tokens the store accepted are cached); when full, it starts afresh.
const CACHE_CAPACITY: usize = 10_000;

pub fn generate_token() -> Result<String> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret)
        .map_err(|error| Error::Internal(format!("no randomness for a token: {error}")))?;
    Ok(format!("{TOKEN_PREFIX}{}", hex(&secret)))
}

pub fn token_sha256(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The token of `Bearer <token>`; None for another scheme or an empty token.
fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Token hash -> tenant, and when that was last confirmed by the store.
type TokenCache = HashMap<[u8; 32], (TenantId, Instant)>;

/// Resolves tokens to tenants, caching positive answers briefly so the hot
/// path does not pay a database round trip per call. A revocation takes
/// effect within `cache_ttl`.
#[derive(Clone)]
pub struct Authenticator {
    store: Arc<dyn Store>,
    cache: Arc<Mutex<TokenCache>>,
    cache_ttl: Duration,
}

impl Authenticator {
    pub fn new(store: Arc<dyn Store>, cache_ttl: Duration) -> Self {
        Self {
            store,
            cache: Arc::new(Mutex::new(HashMap::new())),
            cache_ttl,
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
        let hash = token_sha256(token);
        if let Some(tenant) = self.cached(&hash) {
            return Ok(tenant);
        }
        let tenant = self
            .store
            .authenticate(&hash)
            .await?
            .ok_or(Error::Unauthenticated)?;
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= CACHE_CAPACITY {
                cache.clear();
            }
            cache.insert(hash, (tenant, Instant::now()));
        }
        Ok(tenant)
    }

    fn cached(&self, hash: &[u8; 32]) -> Option<TenantId> {
        let cache = self.cache.lock().ok()?;
        let (tenant, cached_at) = cache.get(hash)?;
        (cached_at.elapsed() < self.cache_ttl).then_some(*tenant)
    }
}
