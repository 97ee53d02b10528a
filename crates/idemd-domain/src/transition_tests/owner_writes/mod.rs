//! The owner's writes: Renew, Complete and Fail, their receipts, late and
//! stale writes.

mod complete;
mod decline;
mod fail;
mod renew;
