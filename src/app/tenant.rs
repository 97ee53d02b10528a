//! `idemd tenant …`: tenants and their bearer tokens, managed from the
//! command line (there is no API for it).

use tracing::info;

use crate::auth;
use crate::config::TenantCommand;
use crate::domain::Error;
use crate::error::BoxError;
use crate::store::Store;

pub(crate) async fn manage_tenant(
    store: &dyn Store,
    command: TenantCommand,
) -> Result<(), BoxError> {
    match command {
        TenantCommand::Create { name } => {
            let token = auth::generate_token()?;
            let tenant = store
                .create_tenant(&name, &auth::token_sha256(&token))
                .await?;
            info!(tenant = tenant.0, name = %name, "tenant created");
            // The token alone on stdout, so scripts can capture it.
            println!("{token}");
            Ok(())
        }
        TenantCommand::Revoke { name } => {
            if store.revoke_tenant(&name).await? {
                info!(name = %name, "tenant revoked");
                Ok(())
            } else {
                Err(Box::new(Error::NotFound))
            }
        }
    }
}
