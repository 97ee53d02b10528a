//! Errors of start-up and of the commands, which end the process with a
//! message for the operator. Calls of the API answer with
//! [`crate::domain::Error`] instead.

/// Any error, sendable between tasks.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
