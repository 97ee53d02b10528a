//! The Rust client of idemd: a typed wrapper over every RPC ([`Client`]),
//! errors decoded from google.rpc details ([`Error`]), one retry policy
//! ([`retry`]), and [`Client::execute_once`], which runs a side effect at most
//! once per logical operation. README.md (next to Cargo.toml) has the usage
//! and the rules the helper follows.

mod client;
mod error;
mod execute;
pub mod proto;
pub mod retry;

pub use crate::client::{Client, ClientConfig};
pub use crate::error::{ERROR_DOMAIN, Error, FieldViolation};
pub use crate::execute::{
    DeadlineSource, Disposition, EffectContext, Execution, Operation, Outcome, Payload,
    PreviousAttempt, Source,
};
pub use crate::proto::{OperationError, OperationState, Result as OperationResult};
