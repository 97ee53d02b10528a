//! `idemd ops show`: one operation and its history, printed as `ops lookup`
//! prints them; with --follow, the history entries that come after, as they
//! come, until no entry can come but the sweeper's (`tail -f` of its
//! timeline): SUCCEEDED, a tombstone, or FAILED for good. A FAILED operation
//! whose policy opted in to `on_failed: new_attempt` is followed on, since a
//! Claim may start a new attempt of it (its failure is printed, and the
//! follow goes on).
//!
//! Following polls Lookup. History page tokens are opaque, and the server
//! hands one out only when more entries follow the page, so there is no token
//! for "after the last entry": a poll starts at the last page boundary seen
//! (at most [`PAGE_SIZE`] entries before the end) and prints only what is new
//! to it — entries past the last sequence printed, and the last entry again
//! when it coalesced more events since (a RENEWED run whose COUNT grew).
//! Entries are only ever appended, and only the last one coalesces
//! (`HistoryCap::place`), so nothing before that boundary can change.

use std::time::Duration;

use serde_json::{Value, json};
use tonic::{Code, Status};
use tonic_types::StatusExt;

use super::connect::Server;
use super::failure::{EXIT_INTERRUPTED, OpsFailure};
use super::{lookup, render};
use crate::backoff::Backoff;
use crate::config::OutputFormat;
use crate::domain::transition::MOST_ATTEMPTS_EVER;
use crate::error::BoxError;
use crate::proto::{
    FailureReason, HistoryEntry, LookupRequest, OnFailed, Operation, OperationState,
    lookup_request::Target,
};

/// History entries a Lookup page holds while following: a poll re-reads at
/// most this many entries it has already printed.
const PAGE_SIZE: u32 = 50;
/// Below this, --interval would only load the server.
const SHORTEST_INTERVAL: Duration = Duration::from_millis(100);
/// Pauses after an UNAVAILABLE while following (or the server's RetryInfo,
/// when it asks for longer).
const FIRST_RETRY: Duration = Duration::from_millis(500);
const LONGEST_RETRY: Duration = Duration::from_secs(10);
/// How long a follow waits out a server that keeps answering UNAVAILABLE
/// before it gives up (exit 3): a restart or a failover takes seconds, an
/// outage this long needs a person.
const UNAVAILABLE_PATIENCE: Duration = Duration::from_secs(300);
/// The streamed history's column widths: an event (CONFLICTING_CLAIM_REFUSED), a
/// state (IN_PROGRESS) and a time fit, so that later rows line up with the
/// first ones.
const HISTORY_WIDTHS: [usize; 9] = [3, 25, 11, 11, 5, 7, 5, 20, 0];

pub(super) async fn run(
    server: &mut Server,
    operation_id: String,
    follow: Option<Duration>,
    output: OutputFormat,
) -> Result<(), BoxError> {
    if let Some(interval) = follow
        && interval < SHORTEST_INTERVAL
    {
        return Err(OpsFailure::usage(format!(
            "--interval {interval:?} is too short: at least {SHORTEST_INTERVAL:?}"
        ))
        .into());
    }
    let mut history = History {
        operation_id,
        resume_token: String::new(),
        last_printed: None,
    };
    let mut printer = Printer::new(output);
    // Ctrl-C, from here on: ends the follow between two lines, never in one.
    let mut interrupted = std::pin::pin!(tokio::signal::ctrl_c());

    let first = match follow {
        None => history
            .poll(server)
            .await
            .map_err(|failure| failure.into_error())?,
        Some(_) => tokio::select! {
            polled = history.poll_patiently(server) => polled?,
            _ = &mut interrupted => return Err(interrupted_error()),
        },
    };
    printer.operation(&first.operation)?;
    printer.history_heading();
    for (entry, updated) in history.news(first.entries) {
        printer.entry(&entry, updated)?;
    }
    let Some(interval) = follow else {
        return Ok(());
    };
    if is_final(&first.operation) {
        return Ok(());
    }
    // The ended operation is printed once per attempt that ends: a FAILED
    // one that is followed on may end again after a new attempt.
    let mut announced = ended_as(&first.operation);
    loop {
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            _ = &mut interrupted => return Err(interrupted_error()),
        }
        let polled = tokio::select! {
            polled = history.poll_patiently(server) => polled?,
            _ = &mut interrupted => return Err(interrupted_error()),
        };
        for (entry, updated) in history.news(polled.entries) {
            printer.entry(&entry, updated)?;
        }
        // The operation and the history's last page come from one snapshot:
        // a terminal state here means its terminal entry was just printed.
        let ended = ended_as(&polled.operation);
        if ended.is_some() && ended != announced {
            printer.ended(&polled.operation)?;
            if !is_final(&polled.operation) {
                // The entries that follow get a heading again.
                printer.history_heading();
            }
        }
        announced = ended;
        if is_final(&polled.operation) {
            return Ok(());
        }
    }
}

fn interrupted_error() -> BoxError {
    OpsFailure::new(EXIT_INTERRUPTED, "interrupted").into()
}

/// No entry can follow but the sweeper's EXPIRED, days later: SUCCEEDED, a
/// tombstone, or FAILED where a Claim replays the failure. A FAILED
/// operation opted in to `on_failed: new_attempt` is not final while a Claim
/// may still start a new attempt: below the server's attempt ceiling, and
/// not failed by its operation deadline (a Claim past that deadline replays
/// the failure too, but deciding so here would compare this machine's clock
/// with the database's: the follow goes on until interrupted).
fn is_final(operation: &Operation) -> bool {
    match render::state(operation.state) {
        OperationState::Succeeded | OperationState::Expired => true,
        OperationState::Failed => !may_start_a_new_attempt(operation),
        _ => false,
    }
}

fn may_start_a_new_attempt(operation: &Operation) -> bool {
    let failed_by_deadline = operation
        .error
        .as_ref()
        .is_some_and(|error| error.reason() == FailureReason::DeadlineExceeded);
    operation.on_failed() == OnFailed::NewAttempt
        && operation.attempt < MOST_ATTEMPTS_EVER
        && !failed_by_deadline
}

/// The attempt that ended and how (terminal states only): what `ended`
/// printed last.
fn ended_as(operation: &Operation) -> Option<(i32, u32)> {
    matches!(
        render::state(operation.state),
        OperationState::Succeeded | OperationState::Failed | OperationState::Expired
    )
    .then_some((operation.state, operation.attempt))
}

/// What one poll read: the operation, and the history from the resume point
/// to the end.
struct Polled {
    operation: Operation,
    entries: Vec<HistoryEntry>,
}

/// Why a poll failed: worth waiting out, or not.
enum PollFailure {
    Transient(Status),
    Final(BoxError),
}

impl PollFailure {
    fn into_error(self) -> BoxError {
        match self {
            PollFailure::Transient(status) => OpsFailure::from_status("Lookup", &status).into(),
            PollFailure::Final(error) => error,
        }
    }
}

/// Where the next poll starts and what has been printed.
struct History {
    operation_id: String,
    /// The last page boundary seen ("" is the start): entries after it are
    /// read again on every poll.
    resume_token: String,
    /// The last entry printed, to tell a new entry from one read again and
    /// to see the last one coalesce more events.
    last_printed: Option<HistoryEntry>,
}

impl History {
    /// Reads from the resume point to the end of the history, every page.
    /// The resume point moves only once the whole read succeeded, so a
    /// failed read loses nothing.
    async fn poll(&mut self, server: &mut Server) -> Result<Polled, PollFailure> {
        let mut entries = Vec::new();
        let mut token = self.resume_token.clone();
        loop {
            let request = server.request(LookupRequest {
                target: Some(Target::OperationId(self.operation_id.clone())),
                include_history: true,
                history_page_size: PAGE_SIZE,
                history_page_token: token.clone(),
                tenant: String::new(),
            });
            let response = match server.client.lookup(request).await {
                Ok(response) => response.into_inner(),
                Err(status) if is_transient(&status) => {
                    return Err(PollFailure::Transient(status));
                }
                Err(status) => {
                    return Err(PollFailure::Final(
                        OpsFailure::from_status("Lookup", &status).into(),
                    ));
                }
            };
            entries.extend(response.history);
            let next = response.next_history_page_token;
            if next.is_empty() {
                self.resume_token = token;
                return Ok(Polled {
                    operation: response.operation.unwrap_or_default(),
                    entries,
                });
            }
            // A server that hands back the same token would loop forever.
            if next == token {
                return Err(PollFailure::Final(
                    "Lookup returned the same history page token twice".into(),
                ));
            }
            token = next;
        }
    }

    /// [`poll`](Self::poll), waiting out UNAVAILABLE (a restart, a
    /// failover, a database that blinked) with a note on stderr for each
    /// wait, up to [`UNAVAILABLE_PATIENCE`].
    async fn poll_patiently(&mut self, server: &mut Server) -> Result<Polled, BoxError> {
        let mut backoff = Backoff::new(FIRST_RETRY, LONGEST_RETRY);
        let started = tokio::time::Instant::now();
        loop {
            match self.poll(server).await {
                Ok(polled) => return Ok(polled),
                Err(PollFailure::Final(error)) => return Err(error),
                Err(PollFailure::Transient(status)) => {
                    let asked = status
                        .get_details_retry_info()
                        .and_then(|info| info.retry_delay)
                        .unwrap_or_default();
                    let pause = backoff.pause().max(asked);
                    if started.elapsed() + pause > UNAVAILABLE_PATIENCE {
                        return Err(OpsFailure::from_status("Lookup", &status).into());
                    }
                    eprintln!(
                        "idemd: Lookup: {:?}: {}; retrying in {pause:?}",
                        status.code(),
                        status.message()
                    );
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }

    /// The entries of a poll that were not printed yet, each with whether
    /// it is the last printed entry again, with more events counted into it.
    fn news(&mut self, entries: Vec<HistoryEntry>) -> Vec<(HistoryEntry, bool)> {
        let mut news = Vec::new();
        for entry in entries {
            let updated = match &self.last_printed {
                Some(last) if entry.sequence < last.sequence => continue,
                Some(last) if entry.sequence == last.sequence => {
                    if *last == entry {
                        continue;
                    }
                    true
                }
                _ => false,
            };
            self.last_printed = Some(entry.clone());
            news.push((entry, updated));
        }
        news
    }
}

/// Transient by the API's contract (docs/api.md, Errors): safe to ask again.
fn is_transient(status: &Status) -> bool {
    matches!(status.code(), Code::Unavailable | Code::ResourceExhausted)
}

/// Prints as `ops lookup` does (a table), or one JSON document a line.
enum Printer {
    Table(Option<render::StreamedTable>),
    Json,
}

impl Printer {
    fn new(output: OutputFormat) -> Self {
        match output {
            OutputFormat::Table => Printer::Table(None),
            OutputFormat::Json => Printer::Json,
        }
    }

    fn operation(&self, operation: &Operation) -> Result<(), BoxError> {
        match self {
            Printer::Table(_) => {
                lookup::print_operation(operation);
                Ok(())
            }
            Printer::Json => render::print_json_line(&operation_line(operation)?),
        }
    }

    fn history_heading(&mut self) {
        if let Printer::Table(table) = self {
            println!();
            println!("history:");
            *table = Some(render::StreamedTable::start(
                &lookup::HISTORY_HEADER,
                &HISTORY_WIDTHS,
            ));
        }
    }

    /// An entry; `updated`: the last one again, with more events counted
    /// into it (the table repeats its SEQ with the new COUNT).
    fn entry(&self, entry: &HistoryEntry, updated: bool) -> Result<(), BoxError> {
        match self {
            Printer::Table(table) => {
                if let Some(table) = table {
                    table.row(&lookup::history_row(entry));
                }
                Ok(())
            }
            Printer::Json => render::print_json_line(&json!({
                "kind": "history_entry",
                "updated": updated,
                "entry": serde_json::to_value(entry)?,
            })),
        }
    }

    /// The operation once more, now that it ended (its result or error);
    /// for a FAILED one that is followed on, the attempt that ended.
    fn ended(&self, operation: &Operation) -> Result<(), BoxError> {
        match self {
            Printer::Table(_) => {
                println!();
                if is_final(operation) {
                    println!("ended:");
                } else {
                    println!("failed (a Claim may start a new attempt; following on):");
                }
                lookup::print_operation(operation);
                Ok(())
            }
            Printer::Json => render::print_json_line(&operation_line(operation)?),
        }
    }
}

fn operation_line(operation: &Operation) -> Result<Value, BoxError> {
    let mut line = json!({ "kind": "operation" });
    if let (Some(line), Value::Object(fields)) =
        (line.as_object_mut(), lookup::operation_json(operation)?)
    {
        line.extend(fields);
    }
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(sequence: u64, count: u64) -> HistoryEntry {
        HistoryEntry {
            sequence,
            count,
            event: "RENEWED".into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_poll_prints_new_entries_and_the_last_one_again_only_when_it_coalesced_more() {
        let mut history = History {
            operation_id: String::new(),
            resume_token: String::new(),
            last_printed: None,
        };
        let sequences = |news: Vec<(HistoryEntry, bool)>| {
            news.into_iter()
                .map(|(entry, updated)| (entry.sequence, entry.count, updated))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            sequences(history.news(vec![entry(1, 1), entry(2, 1)])),
            [(1, 1, false), (2, 1, false)]
        );
        // Read again from the start: nothing new.
        assert_eq!(sequences(history.news(vec![entry(1, 1), entry(2, 1)])), []);
        // The last entry counted two more renewals, and one entry followed.
        assert_eq!(
            sequences(history.news(vec![entry(2, 3), entry(3, 1)])),
            [(2, 3, true), (3, 1, false)]
        );
        assert_eq!(sequences(history.news(vec![entry(3, 1)])), []);
    }
}
