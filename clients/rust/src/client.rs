//! A typed wrapper over every idemd RPC: the bearer token on every call, a
//! deadline on every call, the one retry policy ([`crate::retry`]) and
//! errors decoded into [`Error`].

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status};

use crate::error::Error;
use crate::proto::{self, idempotency_service_client::IdempotencyServiceClient};
use crate::retry::{Jitter, RetryPolicy};

/// How the client calls idemd.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// How failed calls are re-sent.
    pub retry: RetryPolicy,
    /// The deadline of one send (sent as grpc-timeout and enforced here): a
    /// reply that does not come by then counts as lost and the call is re-sent.
    /// A Claim's `wait` is added to it.
    pub call_timeout: Duration,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            retry: RetryPolicy::default(),
            call_timeout: Duration::from_secs(10),
        }
    }
}

/// An idemd client for one tenant. Cheap to clone; clones share the
/// connection.
#[derive(Debug, Clone)]
pub struct Client {
    inner: IdempotencyServiceClient<Channel>,
    authorization: MetadataValue<Ascii>,
    pub(crate) config: ClientConfig,
    jitter: Arc<Mutex<Jitter>>,
}

impl Client {
    /// Connects to `address` (`http://host:port`, or `host:port`) as the
    /// tenant whose bearer token is `token`.
    pub async fn connect(address: &str, token: &str) -> Result<Self, Error> {
        let address = if address.contains("://") {
            address.to_owned()
        } else {
            format!("http://{address}")
        };
        let endpoint = Endpoint::from_shared(address).map_err(|error| Error::InvalidArgument {
            field_violations: Vec::new(),
            message: format!("not an address: {error}"),
        })?;
        let channel = endpoint.connect().await.map_err(|error| Error::Transport {
            code: tonic::Code::Unavailable,
            message: error.to_string(),
        })?;
        Self::new(channel, token)
    }

    /// A client over a channel made elsewhere (TLS, timeouts, a lazy channel).
    pub fn new(channel: Channel, token: &str) -> Result<Self, Error> {
        let authorization =
            format!("Bearer {token}")
                .parse()
                .map_err(|_| Error::Unauthenticated {
                    reason: "INVALID_CREDENTIALS".into(),
                    message: "the token is not printable ASCII".into(),
                })?;
        Ok(Self {
            inner: IdempotencyServiceClient::new(channel),
            authorization,
            config: ClientConfig::default(),
            jitter: Arc::new(Mutex::new(Jitter::from_entropy())),
        })
    }

    pub fn with_config(mut self, config: ClientConfig) -> Self {
        self.config = config;
        self
    }

    /// The same client with backoff jitter drawn from `seed` (tests).
    pub fn with_jitter_seed(mut self, seed: u64) -> Self {
        self.jitter = Arc::new(Mutex::new(Jitter::seeded(seed)));
        self
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Claim; its `wait` lengthens the call's deadline.
    pub async fn claim(&self, request: proto::ClaimRequest) -> Result<proto::ClaimResponse, Error> {
        self.claim_until(request, None)
            .await
            .map(|(response, _sent)| response)
    }

    /// Claim, re-sent no later than `until`.
    /// The answer, and when the send it answers was made: the server counts
    /// the durations in it from its handling of that send, never earlier.
    pub(crate) async fn claim_until(
        &self,
        request: proto::ClaimRequest,
        until: Option<Instant>,
    ) -> Result<(proto::ClaimResponse, Instant), Error> {
        let wait = request
            .wait
            .and_then(|wait| Duration::try_from(wait).ok())
            .unwrap_or_default();
        self.send_answered(request, wait, until, |mut client, request| async move {
            client.claim(request).await
        })
        .await
    }

    pub async fn renew(&self, request: proto::RenewRequest) -> Result<proto::RenewResponse, Error> {
        self.renew_until(request, None)
            .await
            .map(|(response, _sent)| response)
    }

    /// The answer, and when the send it answers was made (as for Claim).
    pub(crate) async fn renew_until(
        &self,
        request: proto::RenewRequest,
        until: Option<Instant>,
    ) -> Result<(proto::RenewResponse, Instant), Error> {
        self.send_answered(
            request,
            Duration::ZERO,
            until,
            |mut client, request| async move { client.renew(request).await },
        )
        .await
    }

    pub async fn complete(
        &self,
        request: proto::CompleteRequest,
    ) -> Result<proto::CompleteResponse, Error> {
        self.complete_until(request, None).await
    }

    pub(crate) async fn complete_until(
        &self,
        request: proto::CompleteRequest,
        until: Option<Instant>,
    ) -> Result<proto::CompleteResponse, Error> {
        self.send(
            request,
            Duration::ZERO,
            until,
            |mut client, request| async move { client.complete(request).await },
        )
        .await
    }

    pub async fn fail(&self, request: proto::FailRequest) -> Result<proto::FailResponse, Error> {
        self.fail_until(request, None).await
    }

    pub(crate) async fn fail_until(
        &self,
        request: proto::FailRequest,
        until: Option<Instant>,
    ) -> Result<proto::FailResponse, Error> {
        self.send(
            request,
            Duration::ZERO,
            until,
            |mut client, request| async move { client.fail(request).await },
        )
        .await
    }

    pub async fn lookup(
        &self,
        request: proto::LookupRequest,
    ) -> Result<proto::LookupResponse, Error> {
        self.send(
            request,
            Duration::ZERO,
            None,
            |mut client, request| async move { client.lookup(request).await },
        )
        .await
    }

    /// Lookup by operation_id, without history.
    pub async fn lookup_operation(&self, operation_id: &str) -> Result<proto::Operation, Error> {
        let found = self
            .lookup(proto::LookupRequest {
                target: Some(proto::lookup_request::Target::OperationId(
                    operation_id.to_owned(),
                )),
                include_history: false,
                ..Default::default()
            })
            .await?;
        found
            .operation
            .ok_or_else(|| Error::InvalidResponse("Lookup answered without an operation".into()))
    }

    pub async fn reconcile(
        &self,
        request: proto::ReconcileRequest,
    ) -> Result<proto::ReconcileResponse, Error> {
        self.send(
            request,
            Duration::ZERO,
            None,
            |mut client, request| async move { client.reconcile(request).await },
        )
        .await
    }

    pub async fn list_unresolved(
        &self,
        request: proto::ListUnresolvedRequest,
    ) -> Result<proto::ListUnresolvedResponse, Error> {
        self.send(
            request,
            Duration::ZERO,
            None,
            |mut client, request| async move { client.list_unresolved(request).await },
        )
        .await
    }

    /// One page of the operations a filter names (support staff's search:
    /// `state:unknown op:payments.* age>10m`; the filter language is in
    /// idemd's docs/api.md). Needs the `reconcile` or `admin` scope; an admin
    /// credential's pages cross tenants and name each operation's tenant. A
    /// filter that does not parse is [`Error::InvalidArgument`] naming the
    /// `filter` field and the position of the mistake.
    pub async fn list_operations(
        &self,
        request: proto::ListOperationsRequest,
    ) -> Result<proto::ListOperationsResponse, Error> {
        self.send(
            request,
            Duration::ZERO,
            None,
            |mut client, request| async move { client.list_operations(request).await },
        )
        .await
    }

    /// Sends `message` and re-sends it unchanged as the retry policy says,
    /// never starting a send after `until` (if given) or the policy's total
    /// deadline. Each send has a deadline of `call_timeout + extra`.
    async fn send<M, R, F, Fut>(
        &self,
        message: M,
        extra: Duration,
        until: Option<Instant>,
        call: F,
    ) -> Result<R, Error>
    where
        M: Clone,
        F: Fn(IdempotencyServiceClient<Channel>, Request<M>) -> Fut,
        Fut: Future<Output = Result<Response<R>, Status>>,
    {
        self.send_answered(message, extra, until, call)
            .await
            .map(|(response, _sent)| response)
    }

    /// [`Client::send`], also returning when the answered send began. Each
    /// send is its own call, and an abandoned one's reply is never read, so
    /// the answer belongs to that send.
    async fn send_answered<M, R, F, Fut>(
        &self,
        message: M,
        extra: Duration,
        until: Option<Instant>,
        call: F,
    ) -> Result<(R, Instant), Error>
    where
        M: Clone,
        F: Fn(IdempotencyServiceClient<Channel>, Request<M>) -> Fut,
        Fut: Future<Output = Result<Response<R>, Status>>,
    {
        let first_sent = Instant::now();
        let timeout = self.config.call_timeout.saturating_add(extra);
        let mut sends = 0;
        loop {
            sends += 1;
            let sent = Instant::now();
            let mut request = Request::new(message.clone());
            request
                .metadata_mut()
                .insert("authorization", self.authorization.clone());
            request.set_timeout(timeout);
            let answer = tokio::time::timeout(timeout, call(self.inner.clone(), request)).await;
            let error = match answer {
                Ok(Ok(response)) => return Ok((response.into_inner(), sent)),
                Ok(Err(status)) => Error::from_status(&status),
                Err(_elapsed) => Error::DeadlineExceeded {
                    message: format!("no reply within {timeout:?}"),
                },
            };
            let delay = {
                let mut jitter = self.jitter.lock().unwrap_or_else(PoisonError::into_inner);
                self.config.retry.resend_after(
                    &error,
                    sends,
                    first_sent,
                    Instant::now(),
                    until,
                    &mut jitter,
                )
            };
            let Some(delay) = delay else {
                return Err(error);
            };
            tokio::time::sleep(delay).await;
        }
    }
}
