//! idemd: a central gRPC service that makes side effects happen at most once
//! per logical request. See docs/design.md for the design and README.md for use.
//!
//! Modules from the bottom up; each uses only those below it: `domain` (pure
//! rules), `store` (the records), `auth`, `metrics` and `cache`, `service` (the
//! operations) and `sweeper`, `grpc` (the API surface), `app` (the commands
//! and the server, with `dev` and `tenant`), then main.rs. `config` (flags
//! only), `error`, `proto`, `shutdown` and `telemetry` sit at the bottom and
//! import none of the others but each other.

pub mod app;
pub mod auth;
pub mod cache;
pub mod config;
mod dev;
pub mod domain;
pub mod error;
pub mod grpc;
pub mod metrics;
pub mod proto;
pub mod service;
pub mod shutdown;
pub mod store;
pub mod sweeper;
pub mod telemetry;
mod tenant;

pub use crate::app::{Application, run, serve};
pub use crate::error::BoxError;
pub use crate::store::open::{SQLITE_FILE_NAME, StoreLocation};
