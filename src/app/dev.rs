//! `serve --dev`: one local tenant, made on the first start and kept.
//!
//! The tenant's token lives in `<data dir>/dev-token` (mode 0600) and is the
//! source of truth: every later start reuses it, so a client retrying after a
//! restart reaches the same tenant, and so the same operations. A new tenant
//! per start would turn that retry into a second effect.
//!
//! The token is written to its file before the tenant is created, so a start
//! that stops in between is finished by the next one with the same token.

use std::fs::OpenOptions;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use tracing::{info, warn};

use crate::auth;
use crate::domain::Error;
use crate::error::BoxError;
use crate::store::Store;
use crate::store::sqlite::create_data_directory;

/// The one tenant `--dev` makes.
pub(crate) const DEV_TENANT: &str = "dev";
/// Its token's file in the data directory.
pub(crate) const DEV_TOKEN_FILE: &str = "dev-token";

/// The dev tenant's token: the stored one, or a new one on the first start.
pub(crate) async fn ensure_dev_tenant(
    store: &dyn Store,
    data_dir: &Path,
) -> Result<String, BoxError> {
    create_data_directory(data_dir).map_err(|error| {
        format!(
            "cannot create the data directory {}: {error}",
            data_dir.display()
        )
    })?;
    let path = data_dir.join(DEV_TOKEN_FILE);
    let token = match read_token(&path)? {
        Some(token) => token,
        None => {
            let token = auth::generate_token()?;
            write_token(&path, &token)?;
            token
        }
    };
    let hash = auth::token_sha256(&token);
    if store.authenticate(&hash).await?.is_some() {
        info!(token_file = %path.display(), "dev tenant reused");
        return Ok(token);
    }
    match store.create_tenant(DEV_TENANT, &hash).await {
        Ok(tenant) => {
            info!(tenant = tenant.0, token_file = %path.display(), "dev tenant created");
            Ok(token)
        }
        Err(Error::InvalidArgument(_)) => Err(format!(
            "an active tenant named {DEV_TENANT:?} exists, but not with the token in {}: \
             restore the file, or revoke the tenant (`idemd tenant revoke {DEV_TENANT}`) and \
             delete the file to start afresh",
            path.display()
        )
        .into()),
        Err(error) => Err(format!(
            "cannot create the dev tenant for the token in {} ({error}); if that token was \
             revoked, delete the file to get a new dev tenant",
            path.display()
        )
        .into()),
    }
}

/// Tells the person at the terminal the token (stdout, not the log).
pub(crate) fn announce(token: &str, data_dir: &Path) {
    let path = data_dir.join(DEV_TOKEN_FILE);
    println!(
        "idemd --dev: tenant {DEV_TENANT:?}, bearer token (kept in {}):\n{token}",
        path.display()
    );
}

fn read_token(path: &PathBuf) -> Result<Option<String>, BoxError> {
    let contents = match std::fs::read_to_string(path) {
        Ok(contents) => contents,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot read {}: {error}", path.display()).into()),
    };
    warn_if_readable_by_others(path);
    let token = contents.trim();
    if token.is_empty() {
        return Err(format!(
            "{} is empty: delete it to get a new dev tenant",
            path.display()
        )
        .into());
    }
    Ok(Some(token.to_owned()))
}

fn write_token(path: &PathBuf, token: &str) -> Result<(), BoxError> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let written = options.open(path).and_then(|mut file| {
        file.write_all(format!("{token}\n").as_bytes())?;
        file.sync_all()
    });
    written.map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    // The file must outlive a crash that follows the tenant's creation.
    if let Some(directory) = path.parent()
        && let Ok(directory) = std::fs::File::open(directory)
    {
        let _ = directory.sync_all();
    }
    Ok(())
}

fn warn_if_readable_by_others(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(metadata) = std::fs::metadata(path)
            && metadata.permissions().mode() & 0o077 != 0
        {
            warn!(token_file = %path.display(), "the dev token file is readable by other users");
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}
