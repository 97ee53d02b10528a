//! The Rust client of idemd: a typed wrapper over every RPC ([`Client`]),
//! errors decoded from google.rpc details ([`Error`]), one retry policy
//! ([`retry`]), and [`Client::execute_once`], which runs a side effect at most
//! once per logical operation. README.md (next to Cargo.toml) states the rules
//! the helper follows.
//!
//! ```no_run
//! # async fn example(token: &str, key: &str, request_json: String, shop: &Shop)
//! #     -> Result<(), idemd_client::Error> {
//! use idemd_client::{Client, Disposition, Operation, OperationResult, Payload};
//!
//! let client = Client::connect("http://127.0.0.1:50051", &token).await?;
//! // The key: made once per business intent and persisted before the first attempt.
//! let operation = Operation::new("orders.create", key, Payload::Json(request_json));
//! let execution = client
//!     .execute_once_with_lookup(
//!         &operation,
//!         // A takeover of an attempt whose outcome is unknown asks the
//!         // provider first (its current state, not a cache): found, it is
//!         // recorded and the effect does not run again.
//!         |ctx| async move {
//!             let order = shop.find_order(ctx.operation_id()).await?;
//!             Some(Disposition::Success(OperationResult { body: order.into_bytes(), ..Default::default() }))
//!         },
//!         |ctx| async move {
//!             // The same on every attempt: the order's reference at the provider.
//!             let order = shop.create_order(ctx.operation_id()).await;
//!             Disposition::Success(OperationResult { body: order.into_bytes(), ..Default::default() })
//!         },
//!     )
//!     .await?; // execution.outcome: Outcome::Succeeded(result) or Outcome::Failed(error)
//! # let _ = execution;
//! # Ok(())
//! # }
//! # struct Shop;
//! # impl Shop {
//! #     async fn create_order(&self, _reference: &str) -> String { String::new() }
//! #     async fn find_order(&self, _reference: &str) -> Option<String> { None }
//! # }
//! ```
//!
//! A provider that deduplicates by an idempotency key needs no lookup: say so
//! with [`Operation::provider_deduplicates`] and pass it the operation_id as
//! that key. [`Client::execute_once`] without either never runs the effect on
//! a takeover it cannot check ([`Error::OutcomeUnknown`]).

mod client;
pub mod consumer;
mod error;
mod execute;
pub mod proto;
pub mod retry;
mod selector;

pub use crate::client::{Client, ClientConfig};
pub use crate::error::{ERROR_DOMAIN, Error, FieldViolation, UnknownBecause};
pub use crate::execute::{
    DeadlineSource, Disposition, EffectContext, Execution, Operation, Outcome, Payload,
    PreviousAttempt, Source,
};
pub use crate::proto::{OperationError, OperationState, Result as OperationResult};
pub use crate::selector::{Selector, SelectorBuilder, SelectorError};
