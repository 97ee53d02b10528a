//! Console sign-ins: a random session id in an HttpOnly cookie, and on the
//! server, behind it, the credential it was signed in with and the session's
//! CSRF token. The browser never holds the credential after sign-in.
//!
//! The credential is kept (in this process's memory only) rather than the
//! principal it granted, so that every page authenticates it again through
//! the API's authenticator: a revoked or expired token stops working in the
//! console within the authenticator's cache TTL, as it does in the API.
//!
//! Sessions live in one replica's memory: a restart signs everyone out, and
//! a console behind a load balancer needs affinity (the console is meant to
//! be reached on one replica: by port-forward, or over HTTPS through a
//! Service with ClientIP affinity, docs/operating.md).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::domain::model::hex;

/// A session unused this long is signed out.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// A session is signed out this long after sign-in, used or not.
pub const ABSOLUTE_TIMEOUT: Duration = Duration::from_secs(8 * 3600);
/// Sessions held at once; past it, the oldest is signed out. Bounds the
/// memory a flood of sign-ins can take.
const MAX_SESSIONS: usize = 1024;
/// Bytes of randomness in a session id and in a CSRF token.
const SECRET_BYTES: usize = 32;

/// A signed-in session, as a page sees it.
#[derive(Clone)]
pub struct Session {
    /// The bearer token the session was signed in with.
    pub token: String,
    /// What every form of this session must send back.
    pub csrf: String,
}

struct Entry {
    session: Session,
    created: Instant,
    used: Instant,
}

#[derive(Default)]
pub struct Sessions {
    entries: Mutex<HashMap<String, Entry>>,
}

/// A fresh random secret, hex: a session id or a CSRF token.
fn random_secret() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; SECRET_BYTES];
    getrandom::fill(&mut bytes)?;
    Ok(hex(&bytes))
}

impl Sessions {
    /// Starts a session for `token`; its id goes in the cookie.
    pub fn start(&self, token: String) -> Result<(String, Session), getrandom::Error> {
        let id = random_secret()?;
        let session = Session {
            token,
            csrf: random_secret()?,
        };
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|_, entry| live(entry, now));
        if entries.len() >= MAX_SESSIONS
            && let Some(oldest) = entries
                .iter()
                .min_by_key(|(_, entry)| entry.created)
                .map(|(id, _)| id.clone())
        {
            entries.remove(&oldest);
        }
        entries.insert(
            id.clone(),
            Entry {
                session: session.clone(),
                created: now,
                used: now,
            },
        );
        Ok((id, session))
    }

    /// The live session of `id`, marked used; None when unknown or expired.
    pub fn get(&self, id: &str) -> Option<Session> {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        match entries.get_mut(id) {
            Some(entry) if live(entry, now) => {
                entry.used = now;
                Some(entry.session.clone())
            }
            Some(_) => {
                entries.remove(id);
                None
            }
            None => None,
        }
    }

    pub fn end(&self, id: &str) {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }
}

fn live(entry: &Entry, now: Instant) -> bool {
    now.duration_since(entry.used) < IDLE_TIMEOUT
        && now.duration_since(entry.created) < ABSOLUTE_TIMEOUT
}

/// Compares two secrets in time that depends on their lengths only, so that
/// a forged CSRF token learns nothing from how long a refusal took.
pub fn secrets_match(expected: &str, given: &str) -> bool {
    expected.len() == given.len()
        && expected
            .bytes()
            .zip(given.bytes())
            .fold(0u8, |difference, (a, b)| difference | (a ^ b))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_found_by_its_id_until_it_ends() {
        let sessions = Sessions::default();
        let (id, session) = sessions.start("idem_token".into()).expect("randomness");
        assert_eq!(id.len(), SECRET_BYTES * 2);
        assert_ne!(id, session.csrf);
        let found = sessions.get(&id).expect("live");
        assert_eq!(found.token, "idem_token");
        assert_eq!(found.csrf, session.csrf);
        assert!(sessions.get("not-a-session").is_none());
        sessions.end(&id);
        assert!(sessions.get(&id).is_none());
    }

    #[test]
    fn secrets_match_only_when_equal() {
        assert!(secrets_match("abc", "abc"));
        assert!(!secrets_match("abc", "abd"));
        assert!(!secrets_match("abc", "ab"));
        assert!(!secrets_match("abc", ""));
    }

    #[test]
    fn sessions_are_bounded() {
        let sessions = Sessions::default();
        let (first, _) = sessions.start("t".into()).expect("randomness");
        for _ in 0..MAX_SESSIONS {
            sessions.start("t".into()).expect("randomness");
        }
        assert!(sessions.get(&first).is_none(), "the oldest was signed out");
        let held = sessions
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        assert_eq!(held, MAX_SESSIONS);
    }
}
