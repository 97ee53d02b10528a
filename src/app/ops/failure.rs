//! How `idemd ops` ends when it does not succeed: a message and an exit code
//! that scripts can rely on (docs/operating.md lists them; they are stable).

use tonic::{Code, Status};
use tonic_types::StatusExt;

/// The server refused the call (any status but the ones below).
pub(super) const EXIT_REFUSED: u8 = 1;
/// A usage error: clap's own, an empty token, an unreadable file.
pub(super) const EXIT_USAGE: u8 = 2;
/// The server cannot be reached: no connection, or UNAVAILABLE.
pub(super) const EXIT_UNREACHABLE: u8 = 3;
/// The operation does not exist (or belongs to another tenant: the server
/// does not tell them apart).
pub(super) const EXIT_NOT_FOUND: u8 = 4;
/// The operator did not confirm at the prompt; nothing was changed.
pub(super) const EXIT_DECLINED: u8 = 5;
/// A bulk reconcile left some operations as they were: changed since they
/// were listed, or refused by the server (the summary names each).
pub(super) const EXIT_NOT_ALL_RECONCILED: u8 = 6;
/// Ended by Ctrl-C (128 + SIGINT, as shells report it): what was printed
/// is whole, what was not reached was not done.
pub(super) const EXIT_INTERRUPTED: u8 = 130;

/// An `idemd ops` command that ends with a specific exit code.
#[derive(Debug)]
pub struct OpsFailure {
    pub exit_code: u8,
    pub message: String,
}

impl OpsFailure {
    pub(super) fn new(exit_code: u8, message: impl Into<String>) -> Self {
        Self {
            exit_code,
            message: message.into(),
        }
    }

    pub(super) fn usage(message: impl Into<String>) -> Self {
        Self::new(EXIT_USAGE, message)
    }

    /// A status the server (or the channel) answered `rpc` with: its code,
    /// and the details a support person acts on (ErrorInfo's reason and
    /// metadata, BadRequest's field violations).
    pub(super) fn from_status(rpc: &str, status: &Status) -> Self {
        let exit_code = match status.code() {
            Code::Unavailable => EXIT_UNREACHABLE,
            Code::NotFound => EXIT_NOT_FOUND,
            _ => EXIT_REFUSED,
        };
        let mut message = format!("{rpc} refused: {:?}: {}", status.code(), status.message());
        let details = StatusDetails::of(status);
        if let Some(reason) = &details.reason {
            message.push_str(&format!("\n  reason: {reason}"));
            for (name, value) in &details.metadata {
                message.push_str(&format!("\n  {name}: {value}"));
            }
        }
        for (field, description) in &details.field_violations {
            message.push_str(&format!("\n  field {field}: {description}"));
        }
        if exit_code == EXIT_UNREACHABLE {
            message = format!("cannot reach the server: {message}");
        }
        Self::new(exit_code, message)
    }
}

/// The google.rpc details of a status that a caller acts on, decoded once
/// for `idemd ops` (text) and `idemd mcp` (JSON).
pub(in crate::app) struct StatusDetails {
    /// ErrorInfo's reason (API: UPPER_SNAKE, stable, documented).
    pub(in crate::app) reason: Option<String>,
    /// ErrorInfo's metadata, sorted by name.
    pub(in crate::app) metadata: Vec<(String, String)>,
    /// BadRequest's field violations: the field and what is wrong with it.
    pub(in crate::app) field_violations: Vec<(String, String)>,
    /// RetryInfo's delay: when to try again.
    pub(in crate::app) retry_delay: Option<std::time::Duration>,
}

impl StatusDetails {
    pub(in crate::app) fn of(status: &Status) -> Self {
        let (reason, metadata) = match status.get_details_error_info() {
            Some(info) => {
                let mut metadata: Vec<_> = info.metadata.into_iter().collect();
                metadata.sort();
                (Some(info.reason), metadata)
            }
            None => (None, Vec::new()),
        };
        let field_violations = status
            .get_details_bad_request()
            .map(|bad_request| {
                bad_request
                    .field_violations
                    .into_iter()
                    .map(|violation| (violation.field, violation.description))
                    .collect()
            })
            .unwrap_or_default();
        let retry_delay = status
            .get_details_retry_info()
            .and_then(|retry| retry.retry_delay);
        Self {
            reason,
            metadata,
            field_violations,
            retry_delay,
        }
    }
}

impl std::fmt::Display for OpsFailure {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.message)
    }
}

impl std::error::Error for OpsFailure {}
