//! One way to take the campaign's locks, for every room of it.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// The value behind `mutex`, even if a thread panicked holding it: the
/// campaign's shared state is counters and plans, each consistent after every
/// single update, and a panicking worker is reported on its own.
pub(crate) fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
