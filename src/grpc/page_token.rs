//! The ListUnresolved page token: where the last page ended, versioned so a
//! later encoding can tell old tokens apart. Opaque to callers.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::domain::{OperationId, OperationRecord};

const VERSION: &str = "v1";

/// The token of the page that follows `record`, oldest first.
pub fn after(record: &OperationRecord) -> String {
    format!(
        "{VERSION}.{}.{}",
        record.created_at.timestamp_micros(),
        record.operation_id
    )
}

/// The (created_at, operation_id) a token continues after; None for anything
/// that is not a token this server wrote.
pub fn parse(token: &str) -> Option<(DateTime<Utc>, OperationId)> {
    let mut parts = token.split('.');
    if parts.next()? != VERSION {
        return None;
    }
    let micros: i64 = parts.next()?.parse().ok()?;
    let operation_id = Uuid::parse_str(parts.next()?).ok()?;
    if parts.next().is_some() {
        return None;
    }
    Some((
        DateTime::from_timestamp_micros(micros)?,
        OperationId(operation_id),
    ))
}
