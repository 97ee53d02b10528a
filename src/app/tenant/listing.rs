//! The CLI's listings, as an aligned table or one JSON array. Times are UTC,
//! to the second.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::config::OutputFormat;
use crate::error::BoxError;
use crate::store::{AuditEntry, TenantInfo, TokenInfo};

fn time(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn optional_time(at: Option<DateTime<Utc>>, none: &str) -> String {
    at.map_or_else(|| none.to_owned(), time)
}

pub(super) fn print_tenants(tenants: &[TenantInfo], output: OutputFormat) -> Result<(), BoxError> {
    let state = |tenant: &TenantInfo| {
        if tenant.revoked_at.is_some() {
            "revoked"
        } else {
            "active"
        }
    };
    match output {
        OutputFormat::Json => print_json(
            tenants
                .iter()
                .map(|tenant| {
                    json!({
                        "name": tenant.name,
                        "id": tenant.id.0,
                        "created_at": time(tenant.created_at),
                        "state": state(tenant),
                        "revoked_at": tenant.revoked_at.map(time),
                        "credentials": tenant.credentials,
                    })
                })
                .collect(),
        ),
        OutputFormat::Table => {
            print_table(
                &["NAME", "ID", "CREATED", "STATE", "CREDENTIALS"],
                tenants
                    .iter()
                    .map(|tenant| {
                        vec![
                            tenant.name.clone(),
                            tenant.id.0.to_string(),
                            time(tenant.created_at),
                            state(tenant).to_owned(),
                            tenant.credentials.to_string(),
                        ]
                    })
                    .collect(),
            );
            Ok(())
        }
    }
}

pub(super) fn print_tokens(tokens: &[TokenInfo], output: OutputFormat) -> Result<(), BoxError> {
    let state = |token: &TokenInfo| if token.expired { "expired" } else { "active" };
    match output {
        OutputFormat::Json => print_json(
            tokens
                .iter()
                .map(|token| {
                    json!({
                        "name": token.name,
                        "scopes": token.scopes.split(',').collect::<Vec<_>>(),
                        "created_at": time(token.created_at),
                        "expires_at": token.expires_at.map(time),
                        "last_used_at": token.last_used_at.map(time),
                        "state": state(token),
                    })
                })
                .collect(),
        ),
        OutputFormat::Table => {
            print_table(
                &["NAME", "SCOPES", "CREATED", "EXPIRES", "LAST USED", "STATE"],
                tokens
                    .iter()
                    .map(|token| {
                        vec![
                            token.name.clone(),
                            token.scopes.clone(),
                            time(token.created_at),
                            optional_time(token.expires_at, "never"),
                            optional_time(token.last_used_at, "never"),
                            state(token).to_owned(),
                        ]
                    })
                    .collect(),
            );
            Ok(())
        }
    }
}

pub(super) fn print_audit(entries: &[AuditEntry], output: OutputFormat) -> Result<(), BoxError> {
    let or_dash = |value: &Option<String>| value.clone().unwrap_or_else(|| "-".into());
    match output {
        OutputFormat::Json => print_json(
            entries
                .iter()
                .map(|entry| {
                    json!({
                        "at": time(entry.at),
                        "actor": entry.actor,
                        "action": entry.action,
                        "tenant": entry.tenant,
                        "target": entry.target,
                        "detail": entry.detail,
                        "reason": entry.reason,
                    })
                })
                .collect(),
        ),
        OutputFormat::Table => {
            print_table(
                &[
                    "AT", "ACTOR", "ACTION", "TENANT", "TARGET", "DETAIL", "REASON",
                ],
                entries
                    .iter()
                    .map(|entry| {
                        vec![
                            time(entry.at),
                            entry.actor.clone(),
                            entry.action.clone(),
                            or_dash(&entry.tenant),
                            or_dash(&entry.target),
                            or_dash(&entry.detail),
                            or_dash(&entry.reason),
                        ]
                    })
                    .collect(),
            );
            Ok(())
        }
    }
}

fn print_json(rows: Vec<Value>) -> Result<(), BoxError> {
    println!("{}", serde_json::to_string_pretty(&Value::Array(rows))?);
    Ok(())
}

/// Also the table of `idemd ops` listings: one look for every listing.
pub(crate) fn print_table(header: &[&str], rows: Vec<Vec<String>>) {
    let mut widths: Vec<usize> = header.iter().map(|title| title.len()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(header.iter().map(|title| (*title).to_owned()).collect());
    for row in rows {
        line(row);
    }
}
