//! `idemd tenant apply -f tenants.yaml`: tenants and their tokens declared in
//! a file (YAML, or JSON, which is YAML too) and converged, one tenant per
//! transaction. The file holds no secret: each token is its SHA-256 in hex,
//! or a path to a file holding the token (a Kubernetes Secret mounted as
//! files), hashed here and never printed.
//!
//! ```yaml
//! tenants:
//!   - name: payments
//!     tokens:
//!       - name: api-2026-12
//!         scopes: [operations]
//!         sha256: 3f1c…            # 64 lowercase hex digits
//!         expiresAt: "2027-03-01T00:00:00Z"
//!       - name: reconciler
//!         scopes: [reconcile]
//!         tokenFile: /etc/idemd/tokens/payments-reconciler
//! ```
//!
//! Every token is checked before anything is written. Tenants the file does
//! not name are left alone; the active tokens of a named tenant that the file
//! does not list are revoked only with `--prune`.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::token_name;
use crate::auth::{self, Scopes};
use crate::error::BoxError;
use crate::store::{Actor, Credentials, DeclaredTenant, DeclaredToken};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TenantsFile {
    #[serde(default)]
    tenants: Vec<TenantEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TenantEntry {
    name: String,
    #[serde(default)]
    tokens: Vec<TokenEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TokenEntry {
    name: String,
    /// Unset: `operations,reconcile`, as for a tenant's first token.
    scopes: Option<Vec<String>>,
    sha256: Option<String>,
    /// Relative paths are read from the declaring file's directory.
    token_file: Option<PathBuf>,
    /// RFC 3339; absolute, so that the file means the same every time.
    expires_at: Option<String>,
}

pub(super) async fn apply_file(
    credentials: &dyn Credentials,
    file: &Path,
    prune: bool,
    actor: &Actor,
) -> Result<(), BoxError> {
    let text = std::fs::read_to_string(file)
        .map_err(|error| format!("cannot read {}: {error}", file.display()))?;
    let parsed: TenantsFile =
        serde_norway::from_str(&text).map_err(|error| format!("{}: {error}", file.display()))?;
    let base = file.parent().unwrap_or(Path::new("."));
    let declared = parsed
        .tenants
        .iter()
        .map(|tenant| declared_tenant(tenant, base))
        .collect::<Result<Vec<_>, BoxError>>()?;
    let actor = Actor {
        reason: Some(format!("tenant apply -f {}", file.display())),
        ..actor.clone()
    };
    let mut changed = false;
    for tenant in &declared {
        let converged = credentials.apply_tenant(tenant, prune, &actor).await?;
        if converged.tenant_created {
            println!("tenant {}: created", tenant.name);
        }
        for (what, names) in [
            ("created", &converged.created),
            ("updated", &converged.updated),
            ("revoked", &converged.revoked),
        ] {
            for name in names {
                println!("tenant {}: token {name} {what}", tenant.name);
            }
        }
        changed |= converged.changed();
    }
    if !changed {
        println!("no changes");
    }
    Ok(())
}

fn declared_tenant(entry: &TenantEntry, base: &Path) -> Result<DeclaredTenant, BoxError> {
    if entry.name.trim().is_empty() {
        return Err("a tenant without a name".into());
    }
    let mut tokens: Vec<DeclaredToken> = Vec::new();
    for token in &entry.tokens {
        let declared = declared_token(token, base)
            .map_err(|error| format!("tenant {:?}, token {:?}: {error}", entry.name, token.name))?;
        if tokens.iter().any(|other| other.name == declared.name) {
            return Err(format!("tenant {:?} declares {:?} twice", entry.name, token.name).into());
        }
        tokens.push(declared);
    }
    Ok(DeclaredTenant {
        name: entry.name.clone(),
        tokens,
    })
}

fn declared_token(entry: &TokenEntry, base: &Path) -> Result<DeclaredToken, BoxError> {
    let token_sha256 = match (&entry.sha256, &entry.token_file) {
        (Some(hex), None) => sha256_of_hex(hex)?,
        (None, Some(path)) => {
            let path = base.join(path);
            let token = std::fs::read_to_string(&path)
                .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
            let token = token.trim();
            if !auth::is_well_formed(token) {
                return Err(format!("{} does not hold an idemd token", path.display()).into());
            }
            auth::token_sha256(token)
        }
        _ => return Err("give exactly one of sha256 and tokenFile".into()),
    };
    let scopes = match &entry.scopes {
        Some(names) => Scopes::parse_list(&names.join(","))?,
        None => Scopes::DEFAULT,
    };
    let expires_at = entry
        .expires_at
        .as_deref()
        .map(|text| {
            DateTime::parse_from_rfc3339(text)
                .map(|at| at.with_timezone(&Utc))
                .map_err(|error| format!("expiresAt {text:?}: {error}"))
        })
        .transpose()?;
    Ok(DeclaredToken {
        name: token_name(&entry.name)?,
        token_sha256,
        scopes: scopes.to_string(),
        expires_at,
    })
}

fn sha256_of_hex(hex: &str) -> Result<[u8; 32], BoxError> {
    let valid = hex.len() == 64
        && hex
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte));
    if !valid {
        return Err("sha256 must be 64 lowercase hex digits".into());
    }
    let mut hash = [0u8; 32];
    for (index, byte) in hash.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[index * 2..index * 2 + 2], 16)?;
    }
    Ok(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_declared_by_exactly_one_of_its_hash_or_its_file() {
        let entry = |sha256: Option<&str>, token_file: Option<&str>| TokenEntry {
            name: "api".into(),
            scopes: Some(vec!["operations".into()]),
            sha256: sha256.map(str::to_owned),
            token_file: token_file.map(PathBuf::from),
            expires_at: None,
        };
        let hex = "ab".repeat(32);
        let declared = declared_token(&entry(Some(&hex), None), Path::new(".")).expect("valid");
        assert_eq!(declared.token_sha256, [0xab; 32]);
        assert_eq!(declared.scopes, "operations");
        assert!(declared_token(&entry(None, None), Path::new(".")).is_err());
        assert!(declared_token(&entry(Some(&hex), Some("x")), Path::new(".")).is_err());
        assert!(declared_token(&entry(Some("AB"), None), Path::new(".")).is_err());
    }
}
