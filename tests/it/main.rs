#![allow(unreachable_pub)] // test modules share helpers with `pub`

//! Integration tests: the store conformance suite, and end-to-end tests with
//! a real server on 127.0.0.1:0 (or the real binary) and real gRPC clients.
//! Each store test runs once per store (`harness::store_tests!`): on a fresh
//! Postgres database (`#[sqlx::test]`, which reads DATABASE_URL) and on a
//! fresh SQLite data directory. They count business effects, not successful
//! responses.

mod harness;

mod admin;
mod admission;
mod answer_counts;
mod api_retries;
mod bounds;
mod cancellation;
mod cli;
mod concurrency;
mod conflicts;
mod conformance;
mod connect;
mod console;
mod console_diagnosis;
mod console_holds;
mod console_tls;
mod credentials;
mod dbfaults;
mod diagnose;
mod durability;
mod embedded;
mod errors;
mod failed_retry;
mod fingerprint_vectors;
#[cfg(target_os = "linux")]
mod frozen;
mod history;
mod holds;
mod inputs;
#[cfg(target_os = "linux")]
mod keepalive;
mod leases;
mod listing;
mod migration_window;
mod mtls;
mod new_key_retries;
mod notify;
mod observability;
mod ops;
mod ops_bulk;
mod ops_show;
mod policy;
mod restart;
mod retention;
mod scenarios;
mod surface;
mod tls;
#[cfg(target_os = "linux")]
mod topology;
mod transport;
