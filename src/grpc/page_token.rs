//! Page tokens: where the last page ended. Opaque to callers: base64url (no
//! padding) of a fixed-size binary form, versioned so that a later encoding
//! can tell old tokens apart, with a check value.
//!
//! ListUnresolved's:
//!
//! ```text
//! version (1 byte, 1) ‖ created_at (i64 microseconds since 1970, big-endian)
//!   ‖ operation_id (16 bytes) ‖ check (first 4 bytes of SHA-256 of the rest)
//! ```
//!
//! Lookup's history pages ([`history_after`]): the operation's id and the
//! last sequence returned, checked under a domain of their own, so neither
//! kind of token passes for the other:
//!
//! ```text
//! version (1 byte, 1) ‖ operation_id (16 bytes) ‖ sequence (u64, big-endian)
//!   ‖ check (first 4 bytes of SHA-256 of the history domain and the rest)
//! ```
//!
//! ListOperations' ([`listing_after`]): the keyset position and what the
//! page was listed with (the canonical filter text, the tenant selection and
//! the order, hashed: [`listing_binding`]), checked under a domain of its
//! own, so a token made for another filter, order or tenant is refused:
//!
//! ```text
//! version (1 byte, 1) ‖ created_at (i64 microseconds, big-endian)
//!   ‖ operation_id (16 bytes) ‖ binding (first 8 bytes of SHA-256)
//!   ‖ check (first 4 bytes of SHA-256 of the listing domain and the rest)
//! ```
//!
//! A token reaches the database's query only after every part is validated:
//! the exact length before any decoding, the version, the check value (a
//! token that was cut, joined or edited by hand is refused), and a created_at
//! in a range every store accepts. The check is no MAC: a tenant who forges a
//! token can only page its own records from another place.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, NaiveDate, Utc};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::domain::{ListOrder, OperationId, OperationRecord, OperationsQuery, TenantSelection};

const VERSION: u8 = 1;
const CHECK_DOMAIN: &[u8] = b"idem.v1 page token\0";
const CHECK_BYTES: usize = 4;
const PAYLOAD_BYTES: usize = 1 + 8 + 16;
#[cfg(test)]
const TOKEN_BYTES: usize = PAYLOAD_BYTES + CHECK_BYTES;
/// base64 without padding: four characters per three bytes, rounded up.
#[cfg(test)]
const TOKEN_CHARS: usize = (TOKEN_BYTES * 4).div_ceil(3);

/// The earliest and latest created_at a token may carry: wider than any
/// record's (the database's clock writes them), narrower than what Postgres
/// and SQLite's text timestamps accept (years 4713 BC–294276 AD and 0–9999).
fn created_at_range() -> (DateTime<Utc>, DateTime<Utc>) {
    let at = |year, month, day, (hour, minute, second, micro)| {
        NaiveDate::from_ymd_opt(year, month, day)
            .and_then(|date| date.and_hms_micro_opt(hour, minute, second, micro))
            .map(|moment| moment.and_utc())
            .unwrap_or(DateTime::<Utc>::MIN_UTC)
    };
    (
        at(2000, 1, 1, (0, 0, 0, 0)),
        at(9999, 12, 31, (23, 59, 59, 999_999)),
    )
}

/// The token of the page that follows `record`, oldest first.
pub fn after(record: &OperationRecord) -> String {
    encode(record.created_at, record.operation_id)
}

/// The token that continues strictly after (created_at, operation_id).
/// Sub-microsecond precision is dropped, as the stores keep microseconds.
pub fn encode(created_at: DateTime<Utc>, operation_id: OperationId) -> String {
    let mut payload = [0u8; PAYLOAD_BYTES];
    payload[0] = VERSION;
    payload[1..].copy_from_slice(&position_bytes(created_at, operation_id));
    seal(CHECK_DOMAIN, &payload)
}

/// The (created_at, operation_id) a token continues after; None for anything
/// that is not a token this server wrote.
pub fn parse(token: &str) -> Option<(DateTime<Utc>, OperationId)> {
    let payload = unseal(token, CHECK_DOMAIN, PAYLOAD_BYTES)?;
    read_position(&payload[1..])
}

/// (created_at, operation_id) as the ListUnresolved and ListOperations
/// tokens carry them: microseconds since 1970 (big-endian), then the id.
fn position_bytes(created_at: DateTime<Utc>, operation_id: OperationId) -> [u8; 24] {
    let mut bytes = [0u8; 24];
    bytes[..8].copy_from_slice(&created_at.timestamp_micros().to_be_bytes());
    bytes[8..].copy_from_slice(operation_id.0.as_bytes());
    bytes
}

/// [`position_bytes`] read back; None for a created_at outside
/// [`created_at_range`].
fn read_position(bytes: &[u8]) -> Option<(DateTime<Utc>, OperationId)> {
    let micros = i64::from_be_bytes(bytes.get(..8)?.try_into().ok()?);
    let created_at = DateTime::from_timestamp_micros(micros)?;
    let (earliest, latest) = created_at_range();
    if created_at < earliest || created_at > latest {
        return None;
    }
    let operation_id = Uuid::from_slice(bytes.get(8..24)?).ok()?;
    Some((created_at, OperationId(operation_id)))
}

/// `payload` (its version byte first) and its check value under `domain`,
/// in base64url without padding.
fn seal(domain: &[u8], payload: &[u8]) -> String {
    let mut token = Vec::with_capacity(payload.len() + CHECK_BYTES);
    token.extend_from_slice(payload);
    token.extend_from_slice(&checked_in(domain, payload));
    URL_SAFE_NO_PAD.encode(token)
}

/// The payload of a token [`seal`]ed under `domain` with `payload_bytes` of
/// payload; None for anything else. The exact length is checked before any
/// decoding, then the version and the check value (a token cut, joined or
/// edited by hand is refused).
fn unseal(token: &str, domain: &[u8], payload_bytes: usize) -> Option<Vec<u8>> {
    let token_bytes = payload_bytes + CHECK_BYTES;
    if token.len() != (token_bytes * 4).div_ceil(3) {
        return None;
    }
    let mut payload = URL_SAFE_NO_PAD.decode(token).ok()?;
    if payload.len() != token_bytes {
        return None;
    }
    let check = payload.split_off(payload_bytes);
    (payload[0] == VERSION && check == checked_in(domain, &payload)).then_some(payload)
}

fn checked_in(domain: &[u8], payload: &[u8]) -> [u8; CHECK_BYTES] {
    let digest = Sha256::new()
        .chain_update(domain)
        .chain_update(payload)
        .finalize();
    let mut check = [0u8; CHECK_BYTES];
    check.copy_from_slice(&digest[..CHECK_BYTES]);
    check
}

const HISTORY_CHECK_DOMAIN: &[u8] = b"idem.v1 history page token\0";
const HISTORY_PAYLOAD_BYTES: usize = 1 + 16 + 8;

/// The token of the history page that follows entry `sequence` of
/// `operation_id`.
pub fn history_after(operation_id: OperationId, sequence: u64) -> String {
    let mut payload = [0u8; HISTORY_PAYLOAD_BYTES];
    payload[0] = VERSION;
    payload[1..17].copy_from_slice(operation_id.0.as_bytes());
    payload[17..].copy_from_slice(&sequence.to_be_bytes());
    seal(HISTORY_CHECK_DOMAIN, &payload)
}

/// The operation and the sequence a history token continues after; None for
/// anything that is not a history token this server wrote. The sequence is
/// at least 1 and fits the stores' signed 64-bit binding.
pub fn parse_history(token: &str) -> Option<(OperationId, u64)> {
    let payload = unseal(token, HISTORY_CHECK_DOMAIN, HISTORY_PAYLOAD_BYTES)?;
    let operation_id = Uuid::from_slice(&payload[1..17]).ok()?;
    let sequence = u64::from_be_bytes(payload[17..].try_into().ok()?);
    if sequence == 0 || i64::try_from(sequence).is_err() {
        return None;
    }
    Some((OperationId(operation_id), sequence))
}

const LISTING_CHECK_DOMAIN: &[u8] = b"idem.v1 listing page token\0";
const LISTING_BINDING_BYTES: usize = 8;
const LISTING_PAYLOAD_BYTES: usize = 1 + 8 + 16 + LISTING_BINDING_BYTES;
#[cfg(test)]
const LISTING_TOKEN_BYTES: usize = LISTING_PAYLOAD_BYTES + CHECK_BYTES;

/// What a ListOperations page was listed with, as a token carries it: a
/// hash of the canonical filter text, the tenant selection and the order,
/// so that neither a reworded filter (same canonical text) is refused nor
/// another filter accepted.
pub type ListingBinding = [u8; LISTING_BINDING_BYTES];

pub fn listing_binding(query: &OperationsQuery) -> ListingBinding {
    let tenants = match &query.tenants {
        TenantSelection::Own(tenant) => format!("own:{}", tenant.0),
        // The name is the filter's `tenant:` term, in the canonical text.
        TenantSelection::Named(_) => "named".to_owned(),
        TenantSelection::All => "all".to_owned(),
    };
    let order = match query.order {
        ListOrder::OldestFirst => "oldest",
        ListOrder::NewestFirst => "newest",
    };
    let digest = Sha256::new()
        .chain_update(query.filter.to_string())
        .chain_update([0])
        .chain_update(tenants)
        .chain_update([0])
        .chain_update(order)
        .finalize();
    let mut binding = [0u8; LISTING_BINDING_BYTES];
    binding.copy_from_slice(&digest[..LISTING_BINDING_BYTES]);
    binding
}

/// The token of the listing page that follows `record`, for a query with
/// that binding.
pub fn listing_after(record: &OperationRecord, binding: ListingBinding) -> String {
    let mut payload = [0u8; LISTING_PAYLOAD_BYTES];
    payload[0] = VERSION;
    payload[1..25].copy_from_slice(&position_bytes(record.created_at, record.operation_id));
    payload[25..].copy_from_slice(&binding);
    seal(LISTING_CHECK_DOMAIN, &payload)
}

/// A listing token read back: the position it continues after and the
/// binding it was made for; None for anything that is not a listing token
/// this server wrote.
pub fn parse_listing(token: &str) -> Option<(DateTime<Utc>, OperationId, ListingBinding)> {
    let payload = unseal(token, LISTING_CHECK_DOMAIN, LISTING_PAYLOAD_BYTES)?;
    let (created_at, operation_id) = read_position(&payload[1..25])?;
    let binding: ListingBinding = payload[25..].try_into().ok()?;
    Some((created_at, operation_id, binding))
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;
    use crate::service::DrawOperationId as _;

    fn moment(rfc3339: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(rfc3339)
            .expect("a valid time")
            .with_timezone(&Utc)
    }

    fn new_year(year: i32) -> DateTime<Utc> {
        NaiveDate::from_ymd_opt(year, 1, 1)
            .and_then(|date| date.and_hms_opt(0, 0, 0))
            .expect("a year chrono holds")
            .and_utc()
    }

    #[test]
    fn a_token_continues_after_what_it_was_made_from() {
        let created_at = moment("2026-12-01T09:21:00.123456Z");
        let operation_id = OperationId::generate();
        let token = encode(created_at, operation_id);
        assert_eq!(token.len(), TOKEN_CHARS);
        assert!(
            token
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_'),
            "url-safe: {token}"
        );
        assert_eq!(parse(&token), Some((created_at, operation_id)));
    }

    #[test]
    fn times_outside_what_every_store_accepts_are_refused() {
        let operation_id = OperationId(Uuid::nil());
        let (earliest, latest) = created_at_range();
        for accepted in [earliest, latest] {
            assert_eq!(
                parse(&encode(accepted, operation_id)),
                Some((accepted, operation_id))
            );
        }
        for refused in [
            earliest - TimeDelta::microseconds(1),
            latest + TimeDelta::microseconds(1),
            // chrono holds both; Postgres refuses the first, SQLite's text
            // form both.
            new_year(-5000),
            new_year(200_000),
            DateTime::<Utc>::MIN_UTC,
            DateTime::<Utc>::MAX_UTC,
        ] {
            assert_eq!(parse(&encode(refused, operation_id)), None, "{refused}");
        }
    }

    #[test]
    fn anything_but_an_unchanged_token_is_refused() {
        let token = encode(moment("2026-12-01T09:21:00Z"), OperationId::generate());
        let mut edited = token.clone().into_bytes();
        edited[12] = if edited[12] == b'A' { b'B' } else { b'A' };
        let edited = String::from_utf8(edited).expect("ascii");
        for refused in [
            String::new(),
            "v1.1764580860000000.0196e0c6-0f4e-7b1c-9d2e-3c4b5a697887".to_owned(),
            edited,
            token[1..].to_owned(),
            format!("{token}A"),
            format!("{}=", &token[..TOKEN_CHARS - 1]),
            token.replace(|_: char| true, "é"),
            "A".repeat(10_000),
        ] {
            assert_eq!(parse(&refused), None, "{refused:?}");
        }
    }

    #[test]
    fn a_history_token_continues_after_its_operation_and_sequence() {
        let operation_id = OperationId::generate();
        let token = history_after(operation_id, 100);
        assert_eq!(parse_history(&token), Some((operation_id, 100)));
        assert!(
            token
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_'),
            "url-safe: {token}"
        );
        for refused in [0, u64::MAX] {
            assert_eq!(parse_history(&history_after(operation_id, refused)), None);
        }
    }

    #[test]
    fn history_and_unresolved_tokens_never_pass_for_each_other() {
        let operation_id = OperationId::generate();
        let unresolved = encode(moment("2026-12-01T09:21:00Z"), operation_id);
        let history = history_after(operation_id, 7);
        assert_eq!(parse_history(&unresolved), None);
        assert_eq!(parse(&history), None);
        let mut edited = history.clone().into_bytes();
        edited[5] = if edited[5] == b'A' { b'B' } else { b'A' };
        let edited = String::from_utf8(edited).expect("ascii");
        for refused in [
            edited,
            history[1..].to_owned(),
            format!("{history}A"),
            String::new(),
        ] {
            assert_eq!(parse_history(&refused), None, "{refused:?}");
        }
    }

    fn listing(filter: &str, tenants: TenantSelection, order: ListOrder) -> OperationsQuery {
        OperationsQuery {
            filter: crate::domain::OperationFilter::parse(filter).expect("a valid filter"),
            tenants,
            order,
            limit: 2,
            after: None,
        }
    }

    #[test]
    fn a_listing_token_is_bound_to_its_filter_tenants_and_order() {
        use crate::domain::TenantId;
        let own = TenantSelection::Own(TenantId(7));
        let base = listing("state:unknown op:pay*", own.clone(), ListOrder::OldestFirst);
        let binding = listing_binding(&base);
        // The same filter reworded binds alike: the canonical text is hashed.
        assert_eq!(
            listing_binding(&listing(
                "op:pay*   state:unknown",
                own.clone(),
                ListOrder::OldestFirst
            )),
            binding
        );
        for other in [
            listing(
                "state:unknown op:pay.*",
                own.clone(),
                ListOrder::OldestFirst,
            ),
            listing("state:unknown op:pay*", own, ListOrder::NewestFirst),
            listing(
                "state:unknown op:pay*",
                TenantSelection::Own(TenantId(8)),
                ListOrder::OldestFirst,
            ),
            listing(
                "state:unknown op:pay*",
                TenantSelection::All,
                ListOrder::OldestFirst,
            ),
        ] {
            assert_ne!(listing_binding(&other), binding, "{other:?}");
        }
        let record_at = moment("2026-12-01T09:21:00.123456Z");
        let operation_id = OperationId::generate();
        let mut token = [0u8; LISTING_TOKEN_BYTES];
        let (payload, check) = token.split_at_mut(LISTING_PAYLOAD_BYTES);
        payload[0] = VERSION;
        payload[1..9].copy_from_slice(&record_at.timestamp_micros().to_be_bytes());
        payload[9..25].copy_from_slice(operation_id.0.as_bytes());
        payload[25..].copy_from_slice(&binding);
        check.copy_from_slice(&checked_in(LISTING_CHECK_DOMAIN, payload));
        let token = URL_SAFE_NO_PAD.encode(token);
        assert_eq!(
            parse_listing(&token),
            Some((record_at, operation_id, binding))
        );
        // Neither other kind passes for a listing token, nor it for them.
        assert_eq!(parse(&token), None);
        assert_eq!(parse_history(&token), None);
        assert_eq!(parse_listing(&encode(record_at, operation_id)), None);
        let mut edited = token.clone().into_bytes();
        edited[20] = if edited[20] == b'A' { b'B' } else { b'A' };
        let edited = String::from_utf8(edited).expect("ascii");
        assert_eq!(parse_listing(&edited), None);
    }
}
