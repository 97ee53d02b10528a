//! A server over a fresh store with two tenants: what most end-to-end
//! tests start from.

use std::sync::Arc;

use chrono::TimeDelta;
use idemd::auth;
use idemd::domain::Limits;
use idemd::store::{Actor, NewToken, Store, TokenCreated};

use super::backend::Backend;
use super::commands::test_limits;
use super::requests::Client;
use super::server::{ServerConfig, TestServer};

/// A server over a fresh store, with two tenants.
pub struct World {
    pub backend: Backend,
    pub store: Arc<dyn Store>,
    pub server: TestServer,
    pub tenant_a: String,
    pub tenant_b: String,
}

impl World {
    pub async fn start(backend: Backend) -> Self {
        Self::start_with(backend, test_limits()).await
    }

    pub async fn start_with(backend: Backend, limits: Limits) -> Self {
        Self::start_configured(backend, limits, ServerConfig::default()).await
    }

    pub async fn start_configured(backend: Backend, limits: Limits, config: ServerConfig) -> Self {
        let store = backend.store();
        let tenant_a = create_tenant(store.as_ref(), "tenant-a").await;
        let tenant_b = create_tenant(store.as_ref(), "tenant-b").await;
        let server = TestServer::start_configured(store.clone(), limits, config).await;
        Self {
            backend,
            store,
            server,
            tenant_a,
            tenant_b,
        }
    }

    pub async fn client(&self) -> Client {
        self.server.client().await
    }
}

pub async fn create_tenant(store: &dyn Store, name: &str) -> String {
    let token = auth::generate_token().expect("token");
    store
        .create_tenant(name, &auth::token_sha256(&token))
        .await
        .expect("tenant created");
    token
}

/// A token of `tenant` named `name` with the comma-separated `scopes`.
pub async fn add_token(store: &dyn Store, tenant: &str, name: &str, scopes: &str) -> String {
    let token = idemd::auth::generate_token().expect("a token");
    let created = store
        .credentials()
        .create_token(
            tenant,
            &NewToken {
                name: name.into(),
                token_sha256: idemd::auth::token_sha256(&token),
                scopes: scopes.into(),
                expires_in: None::<TimeDelta>,
            },
            &Actor {
                name: "cli:tester@test-host".into(),
                reason: Some("a test's credential".into()),
            },
        )
        .await
        .expect("token stored");
    assert_eq!(created, TokenCreated::Created);
    token
}
