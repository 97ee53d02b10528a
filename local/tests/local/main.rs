//! idemd-local against a real Postgres: DATABASE_URL names the server, and
//! each test gets a database of its own (`#[sqlx::test]`), migrated into the
//! schema `idemd` beside the application's own table (`charges`, in
//! `public`). The tests count committed business rows, not answers.

mod app;
mod cases;
mod concurrency;
mod failures;
mod killed;
mod outbox;
