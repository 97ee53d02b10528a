//! Claim: the first claim, key reuse, live leases, takeovers, the attempt budget,
//! retries and replays.

mod budget_spent;
mod failed;
mod first;
mod held;
mod key_reuse;
mod live_lease;
mod migration_window;
mod retry_wait;
mod takeover;
mod terminal;
