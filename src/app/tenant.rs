//! `idemd tenant …` and `idemd audit …`: tenants, their bearer tokens and
//! the audit trail, managed from the command line against the store (there
//! is no API for it). A token is printed once, alone on stdout, when it is
//! created; nothing lists a secret or its hash. Every change is audited as
//! `cli:USER@HOST`.

mod apply;
mod listing;

pub(crate) use listing::print_table;

use std::time::Duration;

use chrono::TimeDelta;
use tracing::info;

use crate::auth::{self, Scopes};
use crate::config::{AuditCommand, TenantCommand, TokenCommand};
use crate::error::BoxError;
use crate::store::{Actor, NewToken, Store, TokenCreated};

pub(crate) async fn manage_tenant(
    store: &dyn Store,
    command: TenantCommand,
) -> Result<(), BoxError> {
    let credentials = store.credentials();
    match command {
        TenantCommand::Create {
            name,
            scopes,
            expires_in,
            reason,
        } => {
            let (token, first) = new_token("initial", &scopes, expires_in)?;
            let tenant = credentials
                .create_tenant_with(&name, &first, &cli_actor(reason))
                .await?;
            info!(tenant = tenant.0, name = %name, "tenant created");
            // The token alone on stdout, so scripts can capture it.
            println!("{token}");
            Ok(())
        }
        TenantCommand::Revoke { name, reason } => {
            if credentials
                .revoke_tenant_as(&name, &cli_actor(reason))
                .await?
            {
                info!(name = %name, "tenant revoked");
                Ok(())
            } else {
                Err(no_tenant(&name))
            }
        }
        TenantCommand::List { output } => {
            let tenants = credentials.list_tenants().await?;
            listing::print_tenants(&tenants, output)
        }
        TenantCommand::Token(command) => manage_token(store, command).await,
        TenantCommand::Apply { file, prune } => {
            apply::apply_file(credentials, &file, prune, &cli_actor(None)).await
        }
    }
}

async fn manage_token(store: &dyn Store, command: TokenCommand) -> Result<(), BoxError> {
    let credentials = store.credentials();
    match command {
        TokenCommand::Create {
            tenant,
            name,
            scopes,
            expires_in,
            reason,
        } => {
            let (token, new) = new_token(&name, &scopes, expires_in)?;
            match credentials
                .create_token(&tenant, &new, &cli_actor(reason))
                .await?
            {
                TokenCreated::Created => {
                    info!(tenant = %tenant, name = %name, "token created");
                    println!("{token}");
                    Ok(())
                }
                TokenCreated::NoSuchTenant => Err(no_tenant(&tenant)),
                TokenCreated::NameTaken => Err(format!(
                    "tenant {tenant:?} has an active token named {name:?}: pick another name, \
                     or revoke that one first"
                )
                .into()),
            }
        }
        TokenCommand::List { tenant, output } => {
            let tokens = credentials
                .list_tokens(&tenant)
                .await?
                .ok_or_else(|| no_tenant(&tenant))?;
            listing::print_tokens(&tokens, output)
        }
        TokenCommand::Revoke {
            tenant,
            name,
            reason,
        } => {
            if credentials
                .revoke_token(&tenant, &name, &cli_actor(reason))
                .await?
            {
                info!(tenant = %tenant, name = %name, "token revoked");
                Ok(())
            } else {
                Err(format!("tenant {tenant:?} has no active token named {name:?}").into())
            }
        }
    }
}

pub(crate) async fn read_audit(store: &dyn Store, command: AuditCommand) -> Result<(), BoxError> {
    match command {
        AuditCommand::List {
            tenant,
            limit,
            output,
        } => {
            let entries = store
                .credentials()
                .audit_log(tenant.as_deref(), limit)
                .await?;
            listing::print_audit(&entries, output)
        }
    }
}

/// A fresh token and what the store keeps of it.
fn new_token(
    name: &str,
    scopes: &str,
    expires_in: Option<Duration>,
) -> Result<(String, NewToken), BoxError> {
    let scopes = Scopes::parse_list(scopes)?;
    let token = auth::generate_token()?;
    let new = NewToken {
        name: token_name(name)?,
        token_sha256: auth::token_sha256(&token),
        scopes: scopes.to_string(),
        expires_in: expires_in.map(expiry).transpose()?,
    };
    Ok((token, new))
}

/// A token name: what `list` shows and `revoke` takes.
pub(crate) fn token_name(name: &str) -> Result<String, BoxError> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"-_.".contains(&byte));
    if valid {
        Ok(name.to_owned())
    } else {
        Err(format!("token name {name:?}: 1-64 letters, digits, `-`, `_` or `.`").into())
    }
}

fn expiry(expires_in: Duration) -> Result<TimeDelta, BoxError> {
    TimeDelta::from_std(expires_in)
        .ok()
        .filter(|delta| *delta > TimeDelta::zero())
        .ok_or_else(|| "--expires-in must be positive and reasonable".into())
}

fn no_tenant(name: &str) -> BoxError {
    format!("no active tenant named {name:?}").into()
}

/// Who runs this command, for the audit trail: `cli:USER@HOST`.
fn cli_actor(reason: Option<String>) -> Actor {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".into());
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|host| host.trim().to_owned())
        .filter(|host| !host.is_empty())
        .unwrap_or_else(|| "unknown".into());
    Actor {
        name: format!("cli:{user}@{host}"),
        reason,
    }
}
