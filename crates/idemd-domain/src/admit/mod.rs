//! The request-to-command policy of every RPC: defaults for what a caller
//! left out, the bounds of [`Limits`](super::Limits) for what it gave, rules
//! across fields. Every check names the request field it refuses, and a
//! request with several bad fields hears about all of them at once, so that
//! callers get BadRequest field violations they can act on.
//!
//! Each command builder takes the `violations` the transport already found
//! in the same request (fields it could not read), so that the answer lists
//! those together with the ones found here. (Not to be confused with
//! `grpc::admission`, which admits calls before their bodies are read.)

mod claim;
mod complete;
mod fail;
mod fields;
mod forget;
mod hold;
mod lookup;
mod policy;
mod reconcile;
mod renew;
mod unresolved;

pub(super) use fields::describe;
pub use hold::DEFAULT_HELD_RETRY_AFTER;

#[cfg(test)]
pub(super) mod testing;
