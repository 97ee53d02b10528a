//! What support staff read about an operation, whichever face shows it (the
//! `idemd ops` CLI or the web console): the answer to "did it happen, and is
//! it safe to retry?", and result bodies a person can read. Pure, over the
//! API's own messages, so both faces say the same thing in the same words.

pub mod body;
pub mod format;
pub mod verdict;
