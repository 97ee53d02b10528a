//! Fault injection: a tower layer in front of the in-process server that
//! loses a request before idemd sees it, or its reply after idemd committed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tonic::Status;
use tonic::codegen::http;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The request never reaches idemd (lost on the way, connection reset).
    LoseRequest,
    /// idemd handles and commits, then the reply is lost on the way back.
    LoseReply,
}

/// Faults armed per RPC method name (`Claim`, `Complete`, …), each used once.
#[derive(Debug, Clone, Default)]
pub struct Faults(Arc<Mutex<HashMap<&'static str, Vec<Fault>>>>);

impl Faults {
    pub fn arm(&self, method: &'static str, fault: Fault) {
        self.0
            .lock()
            .expect("faults lock")
            .entry(method)
            .or_default()
            .push(fault);
    }

    fn take(&self, path: &str) -> Option<Fault> {
        let method = path.rsplit('/').next()?;
        let mut faults = self.0.lock().expect("faults lock");
        let armed = faults.get_mut(method)?;
        (!armed.is_empty()).then(|| armed.remove(0))
    }
}

#[derive(Clone)]
pub(super) struct FaultLayer(pub(super) Faults);

impl<S> tower::Layer<S> for FaultLayer {
    type Service = FaultService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        FaultService {
            inner,
            faults: self.0.clone(),
        }
    }
}

#[derive(Clone)]
pub(super) struct FaultService<S> {
    inner: S,
    faults: Faults,
}

impl<S, B> tower::Service<http::Request<B>> for FaultService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future =
        std::pin::Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let fault = self.faults.take(request.uri().path());
        let lost = || Status::unavailable("connection reset (injected by the test)").into_http();
        match fault {
            None => Box::pin(self.inner.call(request)),
            Some(Fault::LoseRequest) => Box::pin(async move { Ok(lost()) }),
            Some(Fault::LoseReply) => {
                let call = self.inner.call(request);
                Box::pin(async move {
                    // A unary response is complete once the handler returned:
                    // the transaction has committed. Then the reply is lost.
                    let _committed = call.await?;
                    Ok(lost())
                })
            }
        }
    }
}
