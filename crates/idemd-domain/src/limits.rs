//! The bounds of DESIGN.md, configurable: what each request field may hold,
//! the defaults for what a caller leaves out, and the message sizes they add
//! up to. Applying them to a request to build its command is `admit`'s work,
//! one file per RPC.

use chrono::TimeDelta;

/// Kept here as well, where the command builders' callers first found it.
pub use super::error::Violations;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub max_key_bytes: usize,
    pub max_operation_chars: usize,
    pub max_claim_token_bytes: usize,
    /// Bounds `json_payload` and `bytes_payload` before they are parsed or
    /// hashed: canonicalizing JSON costs many times the document's size.
    pub max_payload_bytes: usize,
    pub min_lease: TimeDelta,
    pub max_lease: TimeDelta,
    pub default_lease: TimeDelta,
    pub default_max_attempt_duration: TimeDelta,
    pub max_attempt_duration: TimeDelta,
    pub default_max_attempts: u32,
    pub max_attempts: u32,
    pub default_retention: TimeDelta,
    pub max_retention: TimeDelta,
    pub max_operation_deadline: TimeDelta,
    /// What a first Claim that gives no operation deadline gets: none by
    /// default (the operation may take as many attempts as its budget
    /// allows); an operation policy may set one.
    pub default_operation_deadline: Option<TimeDelta>,
    pub default_retry_after: TimeDelta,
    pub max_retry_after: TimeDelta,
    pub max_result_bytes: usize,
    pub max_content_type_bytes: usize,
    pub max_metadata_entries: usize,
    pub max_metadata_entry_bytes: usize,
    pub max_error_code_bytes: usize,
    pub max_error_message_bytes: usize,
    pub default_page_size: u32,
    pub max_page_size: u32,
    pub default_history_page_size: u32,
    pub max_history_page_size: u32,
    pub max_wait: TimeDelta,
    /// Added to the deadlines that decide whether an earlier attempt may
    /// still be in flight ([`crate::ClaimCommand::clock_margin`]).
    pub clock_margin: TimeDelta,
    /// How long a tombstone refuses new Claims before it is deleted: the
    /// sweeper's (`--tombstone-retention`), and a forgotten operation's.
    pub tombstone_retention: TimeDelta,
    /// The longest reason a Forget may give (it is kept in history and the
    /// audit log).
    pub max_forget_reason_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_key_bytes: 255,
            max_operation_chars: 128,
            max_claim_token_bytes: 64,
            max_payload_bytes: 64 * 1024,
            min_lease: TimeDelta::seconds(1),
            max_lease: TimeDelta::hours(1),
            default_lease: TimeDelta::seconds(30),
            default_max_attempt_duration: TimeDelta::minutes(5),
            max_attempt_duration: TimeDelta::hours(24),
            default_max_attempts: 5,
            max_attempts: 100,
            default_retention: TimeDelta::hours(24),
            max_retention: TimeDelta::days(30),
            max_operation_deadline: TimeDelta::days(30),
            default_operation_deadline: None,
            default_retry_after: TimeDelta::seconds(1),
            max_retry_after: TimeDelta::hours(1),
            max_result_bytes: 1024 * 1024,
            max_content_type_bytes: 255,
            max_metadata_entries: 16,
            max_metadata_entry_bytes: 256,
            max_error_code_bytes: 255,
            max_error_message_bytes: 4 * 1024,
            default_page_size: 100,
            max_page_size: 1000,
            default_history_page_size: 100,
            max_history_page_size: 1000,
            max_wait: TimeDelta::seconds(30),
            clock_margin: TimeDelta::seconds(3),
            tombstone_retention: TimeDelta::days(7),
            max_forget_reason_bytes: 512,
        }
    }
}

/// What protobuf framing (tags, length prefixes, map entries) and the
/// fixed-size fields (ids, fences, durations, enums) of one request can add
/// to its variable-size fields, with room to spare: the fixed fields of the
/// largest request take well under 1 KiB.
const REQUEST_FRAMING_SLACK_BYTES: usize = 16 * 1024;

impl Limits {
    /// The decode limit: no legal request of any method is longer. Counted
    /// as if one request carried every variable-size field at its bound (a
    /// result with its content type and metadata, an error report with its
    /// metadata, a payload, a scope and a claim token), plus
    /// [`REQUEST_FRAMING_SLACK_BYTES`]. Real requests carry a subset, so the
    /// bound is generous yet still a small multiple of the result bound.
    pub fn max_request_bytes(&self) -> usize {
        let metadata = self
            .max_metadata_entries
            .saturating_mul(self.max_metadata_entry_bytes);
        let result = self
            .max_result_bytes
            .saturating_add(self.max_content_type_bytes)
            .saturating_add(metadata);
        let error = self
            .max_error_code_bytes
            .saturating_add(self.max_error_message_bytes)
            .saturating_add(metadata);
        let claim = self
            .max_payload_bytes
            .saturating_add(self.max_key_bytes)
            // Operation names are ASCII: one byte a character.
            .saturating_add(self.max_operation_chars)
            .saturating_add(self.max_claim_token_bytes);
        result
            .saturating_add(error)
            .saturating_add(claim)
            .saturating_add(REQUEST_FRAMING_SLACK_BYTES)
    }

    /// The encode limit. A response carries at most one result (Claim's
    /// replay, Lookup) with a record and its history, or a page of records
    /// without results (ListUnresolved): four times the request bound holds
    /// either with a wide margin, and still bounds what one call can make
    /// the server buffer.
    pub fn max_response_bytes(&self) -> usize {
        self.max_request_bytes().saturating_mul(4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_payload_bound_is_64_kib() {
        assert_eq!(Limits::default().max_payload_bytes, 65_536);
    }
}
