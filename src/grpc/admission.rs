//! Admission of API calls: the tower layer between the observed service and
//! the generated one, which decides before a handler runs (and, for what it
//! can, before the request body is read) whether a call is served at all.
//! Health and reflection are not behind it.
//!
//! In order: it authenticates the call from its `authorization` header and
//! its connection's client certificate (`crate::auth::certificate` says
//! which wins) before the body is polled (a caller without credentials cannot make the
//! server read, let alone buffer, a byte of its body) and hands the
//! [`crate::auth::Principal`] to the handler in the request's extensions; it refuses a
//! call its credential has no scope for (PERMISSION_DENIED `MISSING_SCOPE`,
//! before the body is read, so it writes nothing, and alike for gRPC and
//! Connect JSON, which reaches this layer as the gRPC call it stands for);
//! it sheds the call when the replica has as many in flight as it admits
//! (UNAVAILABLE `OVERLOADED`: shed, never queued, so a burst cannot pile up
//! memory and latency); it refuses the call when its
//! tenant has its share in flight (RESOURCE_EXHAUSTED
//! `TENANT_CONCURRENCY_LIMIT`: one tenant cannot take the others' share);
//! it takes the message's bytes from the replica's budget for request
//! bodies in flight, by the length its gRPC prefix declares, before the
//! message is read (UNAVAILABLE `OVERLOADED` when spent: counts alone let
//! one tenant's 256 calls of 1 MiB results take a replica past its memory
//! limit), and holds them until the call ends; a Connect JSON call is
//! charged the same way by its body's `Content-Length` ([`JsonBodyBytes`])
//! before the body is read and translated, and holds the larger of that
//! and the message it became;
//! it bounds each call's time
//! ([`AdmissionSettings::request_timeout`]: a request body that stalls
//! halfway is cut off, not held); and it answers the codec's refusal of an
//! oversized message in idemd's own terms.

use super::{ApiFuture, ApiService};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Semaphore;
use tonic::Status;
use tonic::codegen::http;
use tonic::server::NamedService;

use super::observe::ApiMethod;
use super::peer::ConnectionInfo;
use crate::auth::{Authenticator, PeerCertificate, Scope};
use crate::domain::{Error, TenantId};
use crate::metrics::Metrics;

/// Longest a call may take by default: twice the default `--max-wait`, so a
/// Claim that waits its whole cap still has time to answer.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Calls in flight on one replica by default.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 1024;
/// Calls in flight for one tenant on one replica by default: a quarter of
/// the replica's, so that one tenant's burst leaves room for the others.
pub const DEFAULT_MAX_IN_FLIGHT_PER_TENANT: usize = 256;
/// The RetryInfo of a shed call: soon, since calls in flight end quickly
/// (and a load balancer may send the retry to another replica).
const SHED_RETRY_AFTER: Duration = Duration::from_millis(100);

use crate::config::DEFAULT_MAX_REQUEST_BYTES_IN_FLIGHT;
use crate::grpc::status::to_status;

/// gRPC's message prefix: a compression flag and a four-byte length.
const MESSAGE_PREFIX_BYTES: usize = 5;

/// The bytes of its request message a call holds of the replica's budget,
/// in the request's extensions for the handler and the store (a batch may
/// bound itself by the bytes its members brought).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestBytes(pub usize);

/// The bytes a Connect call's JSON body may bring, put in its request's
/// extensions by [`super::connect`]: its `Content-Length` (to which its
/// reading is held) or, without one, the most a JSON body may be. Admission
/// charges them to the budget before the body is read, as it charges a
/// gRPC message from its length prefix: reading and translating the JSON
/// is what costs the memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonBodyBytes(pub usize);

/// What tonic's codec says when a message's length prefix exceeds the
/// decode limit (the body is not buffered by then).
const DECODE_LIMIT_MESSAGE: &str = "decoded message length too large";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionSettings {
    /// Longest a call may take, reading its request included; must exceed
    /// the longest Claim `wait`.
    pub request_timeout: Duration,
    /// Calls in flight on this replica; past it, calls are shed.
    pub max_in_flight: usize,
    /// Calls in flight for one tenant on this replica.
    pub max_in_flight_per_tenant: usize,
    /// Bytes of request messages in flight on this replica, as their
    /// length prefixes declare them; past it, calls are shed.
    pub max_request_bytes_in_flight: usize,
}

impl Default for AdmissionSettings {
    fn default() -> Self {
        Self {
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            max_in_flight_per_tenant: DEFAULT_MAX_IN_FLIGHT_PER_TENANT,
            max_request_bytes_in_flight: DEFAULT_MAX_REQUEST_BYTES_IN_FLIGHT,
        }
    }
}

/// The scopes that admit a call of `method`: any one of them. Lookup reads
/// what a caller, a reconciler and an operator need to see; `admin` grants
/// no write of the others by itself (its reads, Forget and GetPolicy
/// excepted). An unknown method needs none (it is answered
/// UNIMPLEMENTED, having read and written nothing).
pub fn scopes_for(method: ApiMethod) -> &'static [Scope] {
    match method {
        ApiMethod::Claim | ApiMethod::Renew | ApiMethod::Complete | ApiMethod::Fail => {
            &[Scope::Operations]
        }
        ApiMethod::Reconcile | ApiMethod::ListUnresolved => &[Scope::Reconcile],
        // An operator reads any tenant's operation (the handler lets only
        // an admin name another tenant).
        ApiMethod::Lookup => &[Scope::Operations, Scope::Reconcile, Scope::Admin],
        // Support staff's search: a reconciler's, or an operator's, who may
        // search every tenant (the handler narrows a non-admin to its own).
        ApiMethod::ListOperations => &[Scope::Reconcile, Scope::Admin],
        // Dropping a stored result is the operator's alone.
        ApiMethod::Forget => &[Scope::Admin],
        // What bounds a Claim gets: a reconciler's question and an operator's.
        ApiMethod::GetPolicy => &[Scope::Reconcile, Scope::Admin],
        // Stopping and restarting new owners is the operator's alone; which
        // holds are in force, a reconciler's question too.
        ApiMethod::Hold | ApiMethod::Release => &[Scope::Admin],
        ApiMethod::ListHolds => &[Scope::Reconcile, Scope::Admin],
        // What the evidence means is a question for whoever may read the
        // operation: its caller, a reconciler, an operator. The plan it
        // answers is then checked against the credential's own scopes.
        ApiMethod::Diagnose => &[Scope::Operations, Scope::Reconcile, Scope::Admin],
        ApiMethod::Unknown => &[],
    }
}

/// What every call of one server shares.
struct Shared {
    settings: AdmissionSettings,
    authenticator: Authenticator,
    metrics: Metrics,
    /// One permit per call in flight.
    in_flight: Arc<Semaphore>,
    /// One permit per byte of request messages in flight.
    request_bytes: Arc<Semaphore>,
    /// How many permits `request_bytes` has in all: no call is charged
    /// more (it would never be admitted).
    request_bytes_total: usize,
    /// Calls in flight per tenant; a tenant with none has no entry, so the
    /// map holds at most as many entries as there are calls in flight.
    tenants_in_flight: Mutex<HashMap<TenantId, usize>>,
    /// The API's decode limit, named in the answer to a larger message.
    max_request_bytes: usize,
}

/// The API service behind admission.
#[derive(Clone)]
pub struct Admitted<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> Admitted<S> {
    pub fn new(
        inner: S,
        settings: AdmissionSettings,
        authenticator: Authenticator,
        metrics: Metrics,
        max_request_bytes: usize,
    ) -> Self {
        let request_bytes_total = settings
            .max_request_bytes_in_flight
            .clamp(max_request_bytes.max(1), Semaphore::MAX_PERMITS);
        Self {
            inner,
            shared: Arc::new(Shared {
                in_flight: Arc::new(Semaphore::new(settings.max_in_flight.max(1))),
                request_bytes: Arc::new(Semaphore::new(request_bytes_total)),
                request_bytes_total,
                tenants_in_flight: Mutex::default(),
                settings,
                authenticator,
                metrics,
                max_request_bytes,
            }),
        }
    }
}

impl<S: NamedService> NamedService for Admitted<S> {
    const NAME: &'static str = S::NAME;
}

/// A call of a tenant, counted in flight until dropped.
struct TenantCall {
    shared: Arc<Shared>,
    tenant: TenantId,
}

impl TenantCall {
    /// Counts the call in, unless its tenant has its share in flight.
    fn enter(shared: &Arc<Shared>, tenant: TenantId) -> Option<Self> {
        let limit = shared.settings.max_in_flight_per_tenant.max(1);
        let mut counts = shared
            .tenants_in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let count = counts.entry(tenant).or_insert(0);
        if *count >= limit {
            return None;
        }
        *count += 1;
        Some(Self {
            shared: shared.clone(),
            tenant,
        })
    }
}

impl Drop for TenantCall {
    fn drop(&mut self) {
        let mut counts = self
            .shared
            .tenants_in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.tenant) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.tenant);
            }
        }
    }
}

/// A refusal, as a trailers-only gRPC response, counted by its reason.
fn refused(metrics: &Metrics, error: Error) -> http::Response<tonic::body::Body> {
    metrics.call_refused(error.reason().as_str());
    refusal(error)
}

/// A refusal, as a trailers-only gRPC response.
fn refusal(error: Error) -> http::Response<tonic::body::Body> {
    to_status(error).into_http()
}

/// tonic's codec refuses a message over the decode limit with OUT_OF_RANGE
/// and no details, from its length prefix. gRPC's convention for that is
/// RESOURCE_EXHAUSTED, and every idemd error carries an ErrorInfo: the
/// refusal is answered as `REQUEST_TOO_LARGE`. Handlers never answer
/// OUT_OF_RANGE, and an encoding error would come in trailers, not here.
fn explain_decode_limit(
    response: http::Response<tonic::body::Body>,
    limit: usize,
    metrics: &Metrics,
) -> http::Response<tonic::body::Body> {
    let refused_by_codec = Status::from_header_map(response.headers()).is_some_and(|status| {
        status.code() == tonic::Code::OutOfRange && status.message().contains(DECODE_LIMIT_MESSAGE)
    });
    if refused_by_codec {
        refused(metrics, Error::RequestTooLarge { limit })
    } else {
        response
    }
}

/// The length the body's first gRPC message prefix declares, and the body
/// as it was (what was read to learn it put back in front). Only the five
/// bytes of the prefix are waited for; a compressed message is declared at
/// its compressed size and is charged as the largest (usize::MAX, clamped
/// by the caller). A body that ends or fails first declares nothing: the
/// codec answers it.
async fn declared_length(mut body: tonic::body::Body) -> (usize, tonic::body::Body) {
    use futures_util::StreamExt;
    use http_body_util::BodyExt;
    let mut read: Vec<Result<http_body::Frame<Bytes>, Status>> = Vec::new();
    let mut prefix = Vec::with_capacity(MESSAGE_PREFIX_BYTES);
    while prefix.len() < MESSAGE_PREFIX_BYTES {
        let Some(frame) = body.frame().await else {
            break;
        };
        let is_data = match &frame {
            Ok(frame) => match frame.data_ref() {
                Some(data) => {
                    let wanted = MESSAGE_PREFIX_BYTES - prefix.len();
                    prefix.extend_from_slice(&data[..wanted.min(data.len())]);
                    true
                }
                None => false,
            },
            Err(_) => false,
        };
        read.push(frame);
        if !is_data {
            break;
        }
    }
    let declared = match prefix.as_slice() {
        [0, a, b, c, d] => u32::from_be_bytes([*a, *b, *c, *d]) as usize,
        [_, _, _, _, _] => usize::MAX,
        _ => 0,
    };
    let replayed = futures_util::stream::iter(read).chain(http_body_util::BodyStream::new(body));
    (
        declared,
        tonic::body::Body::new(http_body_util::StreamBody::new(replayed)),
    )
}

/// `bytes` of the replica's budget, held until dropped; `None` when the
/// budget has not that much left (the call is shed, not queued).
fn charge(shared: &Shared, bytes: usize) -> Option<tokio::sync::OwnedSemaphorePermit> {
    let permits = u32::try_from(bytes).unwrap_or(u32::MAX);
    shared
        .request_bytes
        .clone()
        .try_acquire_many_owned(permits)
        .ok()
}

impl<S: ApiService> tower::Service<http::Request<tonic::body::Body>> for Admitted<S> {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = ApiFuture;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, mut request: http::Request<tonic::body::Body>) -> Self::Future {
        // The clone that was polled ready serves this call (tower's rule).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let shared = self.shared.clone();
        Box::pin(async move {
            let timeout = shared.settings.request_timeout;
            let admitted = async {
                let authorization = request
                    .headers()
                    .get(http::header::AUTHORIZATION)
                    .and_then(|value| value.to_str().ok());
                // The connection's client certificate, judged at its
                // handshake; a request without connection info (none
                // served by tonic lacks it) had none to judge.
                let certificate = request
                    .extensions()
                    .get::<ConnectionInfo>()
                    .map(|info| &info.certificate)
                    .unwrap_or(&PeerCertificate::NotAsked);
                let authenticated = shared
                    .authenticator
                    .authenticate(certificate, authorization)
                    .await;
                let principal = match authenticated {
                    Ok(principal) => principal,
                    Err(error) => return Ok(refused(&shared.metrics, error)),
                };
                let method = ApiMethod::from_path(request.uri().path());
                if let Err(error) = principal.require_any(scopes_for(method)) {
                    return Ok(refused(&shared.metrics, error));
                }
                // Only once authenticated: a call waiting for its token's
                // lookup (in the authenticator's own bounded queue) must not
                // hold a place that a caller with a cached token needs.
                let Ok(_in_flight) = shared.in_flight.clone().try_acquire_owned() else {
                    let retry_after = SHED_RETRY_AFTER;
                    return Ok(refused(&shared.metrics, Error::Overloaded { retry_after }));
                };
                let tenant = principal.tenant;
                let Some(_tenant_call) = TenantCall::enter(&shared, tenant) else {
                    let limit = shared.settings.max_in_flight_per_tenant;
                    let retry_after = SHED_RETRY_AFTER;
                    return Ok(refused(
                        &shared.metrics,
                        Error::TenantConcurrencyLimit { limit, retry_after },
                    ));
                };
                request.extensions_mut().insert(principal);
                // A Connect call's JSON body, before it is read (reading
                // the prefix below reads and translates all of it).
                let json_bytes = request
                    .extensions()
                    .get::<JsonBodyBytes>()
                    .map_or(0, |bytes| bytes.0.min(shared.request_bytes_total));
                let Some(_json_bytes) = charge(&shared, json_bytes) else {
                    let retry_after = SHED_RETRY_AFTER;
                    return Ok(refused(&shared.metrics, Error::Overloaded { retry_after }));
                };
                let (parts, body) = request.into_parts();
                let (declared, body) = declared_length(body).await;
                // A message over the decode limit is refused by the codec
                // from this very prefix; it costs no more than the limit.
                let charged = declared.min(shared.max_request_bytes);
                // A Connect call holds the larger of its JSON body and the
                // message it became, not their sum: the JSON is gone once
                // translated.
                let Some(_request_bytes) = charge(&shared, charged.saturating_sub(json_bytes))
                else {
                    let retry_after = SHED_RETRY_AFTER;
                    return Ok(refused(&shared.metrics, Error::Overloaded { retry_after }));
                };
                let mut request = http::Request::from_parts(parts, body);
                request.extensions_mut().insert(RequestBytes(charged));
                // Only now is the message read: the generated service decodes it.
                inner.call(request).await
            };
            // Authentication waits, the body is read, the handler runs and
            // the answer is encoded: the timeout bounds all of it.
            let Ok(response) = tokio::time::timeout(timeout, admitted).await else {
                return Ok(refused(&shared.metrics, Error::RequestTimeout { timeout }));
            };
            Ok(explain_decode_limit(
                response?,
                shared.max_request_bytes,
                &shared.metrics,
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_method_needs_a_scope_and_admin_alone_admits_only_the_operators() {
        for method in ApiMethod::SERVED {
            let needed = scopes_for(*method);
            assert!(!needed.is_empty(), "{method:?}");
            // The exceptions: the operator's reads (Lookup, ListOperations,
            // GetPolicy, across tenants) and Forget, which is admin only.
            // Reconcile on another tenant's behalf needs reconcile as well.
            match method {
                ApiMethod::ListOperations | ApiMethod::GetPolicy => {
                    assert_eq!(needed, [Scope::Reconcile, Scope::Admin]);
                }
                ApiMethod::Lookup | ApiMethod::Diagnose => {
                    assert_eq!(needed, [Scope::Operations, Scope::Reconcile, Scope::Admin]);
                }
                ApiMethod::Forget | ApiMethod::Hold | ApiMethod::Release => {
                    assert_eq!(needed, [Scope::Admin]);
                }
                ApiMethod::ListHolds => assert_eq!(needed, [Scope::Reconcile, Scope::Admin]),
                _ => assert!(!needed.contains(&Scope::Admin), "{method:?}"),
            }
        }
    }

    #[test]
    fn only_the_codecs_decode_limit_is_answered_as_request_too_large() {
        let (metrics, _) =
            Metrics::new(crate::metrics::LabelPolicy::default(), None).expect("a metrics registry");
        let too_large = Status::out_of_range(
            "Error, decoded message length too large: found 9 bytes, the limit is: 8 bytes",
        );
        let answered = explain_decode_limit(too_large.into_http(), 8, &metrics);
        let status = Status::from_header_map(answered.headers()).expect("a status");
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);

        let other = Status::out_of_range("something else");
        let answered = explain_decode_limit(other.into_http(), 8, &metrics);
        let status = Status::from_header_map(answered.headers()).expect("a status");
        assert_eq!(status.code(), tonic::Code::OutOfRange);
    }
}
