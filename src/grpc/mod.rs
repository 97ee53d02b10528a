//! The gRPC surface: thin handlers, proto conversion, the error mapping.

pub mod admission;
pub mod codec;
pub mod connect;
pub mod observe;
pub mod page_token;
pub mod peer;
pub mod request;
pub mod response;
pub mod server;
pub mod status;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;

use tonic::codegen::http;

/// What each layer in front of the API (Connect, Observed, Admitted) wraps:
/// an HTTP service of tonic bodies that never fails (errors travel as gRPC
/// statuses), cloned into each call's future.
pub trait ApiService:
    tower::Service<
        http::Request<tonic::body::Body>,
        Response = http::Response<tonic::body::Body>,
        Error = Infallible,
        Future: Send + 'static,
    > + Clone
    + Send
    + 'static
{
}

impl<S> ApiService for S where
    S: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = Infallible,
            Future: Send + 'static,
        > + Clone
        + Send
        + 'static
{
}

/// The future each of those layers answers with.
pub type ApiFuture =
    Pin<Box<dyn Future<Output = Result<http::Response<tonic::body::Body>, Infallible>> + Send>>;
