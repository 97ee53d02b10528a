//! idemd: a central gRPC service that makes side effects happen at most once
//! per logical request. See docs/design.md for the design and README.md for use.
//!
//! Modules from the bottom up; each uses only those below it: `domain` (pure
//! rules), `store` (the records), `auth` and `metrics`, `service` (the
//! operations, with their result cache) and `sweeper`, `grpc` (the API
//! surface), `listen` (accepting connections, plain or TLS, for the API and
//! the console), `console` (the web console: a client of the API in process),
//! `app` (the commands and the server, with opening the store from the
//! flags, the dev tenant and the tenant commands), then main.rs. `config`
//! (flags only), `error`, `proto`, `support` (what support staff read, over
//! the proto's messages), `shutdown`, `backoff` and `telemetry` sit at the
//! bottom and import none of the others but each other.

pub mod app;
pub mod auth;
pub mod backoff;
pub mod config;
pub mod console;
pub mod error;
pub mod grpc;
pub mod listen;
pub mod metrics;
pub mod proto;
pub mod service;
pub mod shutdown;
pub mod store;
pub mod support;
pub mod sweeper;
pub mod telemetry;

/// The pure rules live in their own crate (crates/idemd-domain) so that
/// idemd-local runs the same state machine inside a caller's transaction;
/// every `crate::domain::…` path here names that crate.
pub use idemd_domain as domain;

pub use crate::app::{Application, run};
pub use crate::error::BoxError;
/// The result cache, at its old path (it lives with the service).
pub use crate::service::cache;
pub use crate::store::open::{SQLITE_FILE_NAME, StoreLocation};
