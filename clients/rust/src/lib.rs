//! The Rust client of idemd.

pub mod proto;
