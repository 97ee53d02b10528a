//! The conformance suite: the state machine of DESIGN.md driven through
//! `IdempotencyService` (the claim loop, its unlocked replay path, the owner
//! writes, reconciliation, lookups and lists, exactly as the gRPC handlers
//! call them) over each store, and run unchanged against every store (see
//! `store_tests!`). A store passes when it persists exactly what each decision
//! said, settles races in the database, keeps tenants apart and keeps every
//! value as it was given. Tests of raw store behaviour (a second insert, a
//! transition whose decision the test writes, races held open by a pause
//! hook, sweeps, tenant administration) call the `Store` itself.
//!
//! One file a part of the state machine, each listing its own tests in
//! `store_tests!`; `fixture` is the service over a fresh store that they share.

mod fixture;

mod bounds_and_values;
mod existing_records;
mod first_claims;
mod owner_writes;
mod races;
mod reconciliation;
mod retention;
mod tenants_and_lists;
