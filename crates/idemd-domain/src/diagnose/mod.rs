//! Diagnose (issue 23): what the evidence a caller brings means, beside
//! what idemd holds, and the next safe moves. Pure, as the transitions are.
//! So far: the refusal of evidence that carries a secret.

pub mod secrets;

pub use secrets::{SecretKind, find_secret};
