//! The gRPC surface: thin handlers, proto conversion, the error mapping.

pub mod admission;
pub mod connect;
pub mod observe;
pub mod page_token;
pub mod request;
pub mod response;
pub mod server;
pub mod status;
