//! idemd: a central gRPC service that makes side effects happen at most once
//! per logical request. See DESIGN.md for the contract and README.md for use.

pub mod app;
pub mod auth;
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
