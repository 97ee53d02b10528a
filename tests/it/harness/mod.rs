//! A real idemd server on 127.0.0.1:0 over a fresh store (a fresh Postgres
//! database, or a fresh SQLite data directory), real tonic clients, a fault
//! layer that loses requests or replies, and a provider that counts business
//! effects.
//!
//! Every test that touches a store is written once, as `async fn
//! name(backend: Backend)`, and listed in [`store_tests!`], which runs it as
//! `name::postgres` and as `name::sqlite`.
//!
//! One file a concern; everything is re-exported here, so that a test file
//! needs only `use crate::harness::*;`.

mod backend;
mod commands;
mod counting_store;
mod faults;
mod frozen_db;
mod postgres_server;
mod process;
mod provider;
mod requests;
mod server;
mod temp_dir;
mod world;

pub(crate) use backend::store_tests;
pub use backend::*;
pub use commands::*;
pub use counting_store::*;
pub use faults::*;
pub use frozen_db::*;
pub use postgres_server::ServerBinaries;
pub use process::*;
pub use provider::*;
pub use requests::*;
pub use server::*;
pub use temp_dir::*;
pub use world::*;
