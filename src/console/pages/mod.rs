//! The console's pages, as HTML escaped by construction (maud). Each takes
//! what its handler read through the API and renders it; none reads
//! anything itself.

pub mod dashboard;
pub mod diagnosis;
pub mod holds;
pub mod layout;
pub mod lists;
pub mod operation;
pub mod reconcile;

pub use layout::{Viewer, error_page, login_page, page};
