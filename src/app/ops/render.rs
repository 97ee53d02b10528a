//! What the ops commands print: times in UTC to the second, states without
//! their enum prefix, ages, result bodies a person can read, and JSON.

use serde_json::Value;

use crate::error::BoxError;

pub(super) use crate::app::tenant::print_table;
pub(super) use crate::support::body::{opaque_body, readable_body};
pub(super) use crate::support::format::{age, state, state_name, time};

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
