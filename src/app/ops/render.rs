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
