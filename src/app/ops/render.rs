//! What the ops commands print: times in UTC to the second, states without
//! their enum prefix, ages, result bodies a person can read, and JSON.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::error::BoxError;
use crate::proto::{OperationState, Result as ProtoResult};

pub(super) use crate::app::tenant::print_table;

pub(super) fn time(at: Option<&pbjson_types::Timestamp>) -> String {
    at.and_then(|at| DateTime::<Utc>::from_timestamp(at.seconds, at.nanos.max(0) as u32))
        .map_or_else(
            || "-".to_owned(),
            |at| at.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        )
}

pub(super) fn state(state: i32) -> OperationState {
    OperationState::try_from(state).unwrap_or(OperationState::Unspecified)
}

pub(super) fn state_name(state: OperationState) -> &'static str {
    let name = state.as_str_name();
    name.strip_prefix("OPERATION_STATE_").unwrap_or(name)
}

/// How long ago, by this machine's clock: `45s`, `12m05s`, `3h07m`, `2d04h`.
pub(super) fn age(created_at: Option<&pbjson_types::Timestamp>, now: DateTime<Utc>) -> String {
    let Some(created_at) = created_at else {
        return "-".to_owned();
    };
    let seconds = (now.timestamp() - created_at.seconds).max(0);
    let (days, hours, minutes) = (seconds / 86_400, seconds / 3600 % 24, seconds / 60 % 60);
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3600 => format!("{minutes}m{:02}s", seconds % 60),
        3600..86_400 => format!("{}h{minutes:02}m", seconds / 3600),
        _ => format!("{days}d{hours:02}h"),
    }
}

/// Bytes a person can read only as text when they are text: `text/*` or
/// JSON, and valid UTF-8.
pub(super) fn readable_body(result: &ProtoResult) -> Option<&str> {
    let content_type = result
        .content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let textual = content_type.starts_with("text/")
        || content_type == "application/json"
        || content_type.ends_with("+json");
    textual
        .then(|| std::str::from_utf8(&result.body).ok())
        .flatten()
}

/// The size and the first 32 bytes in hex, for a body that is not text.
pub(super) fn opaque_body(body: &[u8]) -> String {
    let prefix: String = body
        .iter()
        .take(32)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let more = if body.len() > 32 { "…" } else { "" };
    format!("{} bytes: {prefix}{more}", body.len())
}

/// `name: value` lines, the values aligned.
pub(super) fn print_fields(fields: &[(&str, String)]) {
    let width = fields.iter().map(|(name, _)| name.len()).max().unwrap_or(0) + 1;
    for (name, value) in fields {
        println!("{:<width$} {value}", format!("{name}:"));
    }
}

pub(super) fn print_json(document: &Value) -> Result<(), BoxError> {
    println!("{}", serde_json::to_string_pretty(document)?);
    Ok(())
}

/// A table printed a row at a time, as the rows arrive (`ops show
/// --follow`): the widths are chosen up front, so a wider cell shifts only
/// its own line, and every line goes out as soon as it is printed.
pub(super) struct StreamedTable {
    widths: Vec<usize>,
}

impl StreamedTable {
    /// Prints the header; each column is at least `widths` wide.
    pub(super) fn start(header: &[&str], widths: &[usize]) -> Self {
        let table = Self {
            widths: header
                .iter()
                .zip(widths.iter().chain(std::iter::repeat(&0)))
                .map(|(title, width)| title.len().max(*width))
                .collect(),
        };
        table.row(
            &header
                .iter()
                .map(|title| (*title).to_owned())
                .collect::<Vec<_>>(),
        );
        table
    }

    pub(super) fn row(&self, cells: &[String]) {
        println!("{}", self.line(cells));
    }

    fn line(&self, cells: &[String]) -> String {
        let padded: Vec<String> = cells
            .iter()
            .zip(&self.widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        padded.join("  ").trim_end().to_owned()
    }
}

/// [`print_table`]'s text, for a table that goes to stderr (beside a
/// prompt) rather than to stdout.
pub(super) fn table_text(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = header.iter().map(|title| title.len()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let table = StreamedTable { widths };
    let mut text = table.line(
        &header
            .iter()
            .map(|title| (*title).to_owned())
            .collect::<Vec<_>>(),
    );
    text.push('\n');
    for row in rows {
        text.push_str(&table.line(&row));
        text.push('\n');
    }
    text
}

/// One JSON document on one line (NDJSON), for streams a script reads
/// line by line.
pub(super) fn print_json_line(document: &Value) -> Result<(), BoxError> {
    println!("{}", serde_json::to_string(document)?);
    Ok(())
}
