#![allow(unreachable_pub)] // test modules share helpers with `pub`

//! End-to-end tests: a real server on 127.0.0.1:0, a fresh Postgres database
//! per test (`#[sqlx::test]`, which reads DATABASE_URL), real gRPC clients.
//! They count business effects, not successful responses.

mod harness;

mod api_retries;
mod concurrency;
mod errors;
mod leases;
mod races;
mod restart;
mod retention;
mod scenarios;
mod surface;
