//! The gRPC surface: thin handlers, proto conversion, the error mapping.

pub mod convert;
pub mod observe;
pub mod server;
pub mod status;
