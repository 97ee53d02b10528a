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
//!     .execute_once(&operation, |ctx| async move {
//!         // The same on every attempt: pass it to the provider as ITS idempotency key.
//!         let order = shop.create_order(ctx.operation_id()).await;
//!         Disposition::Success(OperationResult { body: order.into_bytes(), ..Default::default() })
//!     })
//!     .await?; // execution.outcome: Outcome::Succeeded(result) or Outcome::Failed(error)
//! # let _ = execution;
//! # Ok(())
//! # }
//! # struct Shop;
//! # impl Shop {
//! #     async fn create_order(&self, _reference: &str) -> String { String::new() }
//! # }
//! ```

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
