//! Charges a customer at most once through idemd: the README's client
//! protocol, run against a server.
//!
//! ```sh
//! cargo run --release -- serve --dev        # in another terminal
//! IDEMD_TOKEN=$(cat idemd-data/dev-token) cargo run --example charge_once
//! ```
//!
//! The address and token come from `--addr`/`IDEMD_ADDR` (default
//! `http://127.0.0.1:50051`) and `--token`/`IDEMD_TOKEN`. The example claims
//! one business intent (operation `payments.charge`, a stable `--key`, a JSON
//! request), charges a simulated provider only when it owns the operation,
//! renews its lease while the charge runs, and completes with the provider's
//! answer. Then it runs the same intent again, as a retry after a crash would,
//! and prints the replayed result: the provider was charged once. Run it again
//! with the same key and both runs replay.
//!
//! `tests/it/examples.rs` runs these same functions against a test server, so
//! the example cannot drift from the protocol the server implements.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use clap::Parser;
use idemd::proto::{
    self, claim_response::Outcome, idempotency_service_client::IdempotencyServiceClient,
};
use tokio::time::Instant;
use tonic::transport::Channel;
use tonic::{Code, Request, Response, Status};
use tonic_types::StatusExt;

/// A call answered UNAVAILABLE is re-sent unchanged, this many times in all.
const SENDS: usize = 5;
/// Claims answered Pending are made again, this many times in all.
const CLAIM_ROUNDS: usize = 20;
/// The longest nap before claiming a Pending operation again.
const MAX_PENDING_NAP: Duration = Duration::from_secs(5);

#[derive(Debug, Parser)]
#[command(about = "Charge a simulated provider at most once through idemd")]
struct Flags {
    /// The idemd server, `http://host:port` (or `host:port`).
    #[arg(long, env = "IDEMD_ADDR", default_value = "http://127.0.0.1:50051")]
    addr: String,
    /// A tenant's bearer token, as `idemd tenant create` or `serve --dev` printed it.
    #[arg(long, env = "IDEMD_TOKEN", hide_env_values = true)]
    token: String,
    /// The idempotency key: one per business intent, persisted before the first attempt.
    #[arg(long, default_value = "example-order-1")]
    key: String,
    /// How long the simulated charge takes; longer than the lease, so it is renewed.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    charge_time: Duration,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let flags = Flags::parse();
    let address = if flags.addr.contains("://") {
        flags.addr.clone()
    } else {
        format!("http://{}", flags.addr)
    };
    let client = IdempotencyServiceClient::connect(address).await?;
    let intent = Intent {
        operation: "payments.charge".into(),
        key: flags.key,
        json_payload: r#"{"amount":1000,"currency":"EUR"}"#.into(),
        lease: Duration::from_secs(2),
    };
    let provider = SimulatedProvider::new(flags.charge_time);

    let first = charge_once(&client, &flags.token, &intent, &provider).await?;
    println!("first run: {first}");
    let retry = charge_once(&client, &flags.token, &intent, &provider).await?;
    println!("second run, a retry of the same intent: {retry}");
    println!(
        "the provider was charged {} time(s) by this process",
        provider.charges()
    );
    Ok(())
}

/// One business intent: the same scope and request on every attempt.
#[derive(Debug, Clone)]
pub struct Intent {
    pub operation: String,
    pub key: String,
    pub json_payload: String,
    /// The lease asked for; renewed every third of it while the charge runs.
    pub lease: Duration,
}

/// How one run of the protocol ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    /// This run owned the operation and recorded `body`. `charged` is false
    /// when a takeover found the earlier attempt's charge at the provider and
    /// recorded that charge instead of making another.
    Recorded {
        operation_id: String,
        body: Vec<u8>,
        charged: bool,
    },
    /// The operation had ended: its stored outcome, replayed. Nothing ran.
    Replayed(Box<proto::Completed>),
    /// Only a reconciler can settle it now. Nothing ran.
    NeedsReconciliation(proto::NeedsReconciliation),
    /// A newer owner or a reconciler took the operation while this run held
    /// it; what is stored stands and the charge is never redone.
    Superseded(Option<Box<proto::Operation>>),
    /// The attempt deadline came before the charge finished: the charge was
    /// cancelled and its outcome reported UNKNOWN, for the next owner to check.
    Abandoned { operation_id: String },
    /// The server answered an outcome this client does not know: do not execute.
    Unrecognised,
}

impl fmt::Display for Ending {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ending::Recorded {
                operation_id,
                body,
                charged,
            } => write!(
                formatter,
                "{} operation {operation_id}: {}",
                if *charged {
                    "charged and recorded"
                } else {
                    "found the earlier attempt's charge and recorded"
                },
                String::from_utf8_lossy(body)
            ),
            Ending::Replayed(completed) => match &completed.outcome {
                Some(proto::completed::Outcome::Result(result)) => write!(
                    formatter,
                    "replayed operation {} after {} attempt(s): {}; nothing executed",
                    completed.operation_id,
                    completed.attempts,
                    String::from_utf8_lossy(&result.body)
                ),
                Some(proto::completed::Outcome::Error(error)) => write!(
                    formatter,
                    "replayed the failure of operation {}: {}; nothing executed",
                    completed.operation_id, error.code
                ),
                None => write!(formatter, "replayed operation {}", completed.operation_id),
            },
            Ending::NeedsReconciliation(needs) => write!(
                formatter,
                "operation {} needs reconciliation (fence {}); nothing executed",
                needs.operation_id, needs.fence
            ),
            Ending::Superseded(operation) => write!(
                formatter,
                "superseded; the operation as stored: {:?}",
                operation.as_ref().map(|operation| operation.state())
            ),
            Ending::Abandoned { operation_id } => write!(
                formatter,
                "operation {operation_id}: abandoned at its attempt deadline, reported UNKNOWN"
            ),
            Ending::Unrecognised => write!(formatter, "an unknown outcome; nothing executed"),
        }
    }
}

/// A stand-in for a payment provider. It charges every time it is asked
/// (keeping that to once is idemd's and this client's job) and can be asked
/// which charge a reference got, as a new owner must ask before charging again.
#[derive(Debug, Clone)]
pub struct SimulatedProvider {
    latency: Duration,
    charges: Arc<Mutex<Vec<Charge>>>,
}

/// One charge the provider made, and the reference it was made for.
#[derive(Debug, Clone)]
struct Charge {
    reference: String,
    body: Vec<u8>,
}

impl SimulatedProvider {
    pub fn new(latency: Duration) -> Self {
        Self {
            latency,
            charges: Arc::default(),
        }
    }

    /// Charges once more. Takes effect when it returns: cancelled before
    /// that, nothing was charged.
    pub async fn charge(&self, reference: &str) -> Vec<u8> {
        tokio::time::sleep(self.latency).await;
        let mut charges = self.charges.lock().unwrap_or_else(PoisonError::into_inner);
        let body = format!("{{\"charge\":\"ch_{}\"}}", charges.len() + 1).into_bytes();
        charges.push(Charge {
            reference: reference.to_owned(),
            body: body.clone(),
        });
        body
    }

    /// The charge made for `reference`, if any.
    pub fn find(&self, reference: &str) -> Option<Vec<u8>> {
        let charges = self.charges.lock().unwrap_or_else(PoisonError::into_inner);
        charges
            .iter()
            .find(|charge| charge.reference == reference)
            .map(|charge| charge.body.clone())
    }

    pub fn charges(&self) -> usize {
        self.charges
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// Runs the protocol for `intent` until it has an answer: Claim; charge only
/// when this run owns the operation (on ReconcileFirst, only after asking the
/// provider); Renew while charging; Complete; never charge on any other
/// outcome. An error is an answer the protocol does not cover (the key reused
/// with another request, bad credentials): nothing was charged by this run.
pub async fn charge_once(
    client: &IdempotencyServiceClient<Channel>,
    token: &str,
    intent: &Intent,
    provider: &SimulatedProvider,
) -> Result<Ending, Status> {
    for _ in 0..CLAIM_ROUNDS {
        // A fresh token per attempt, reused only for re-sends of this Claim.
        let request = proto::ClaimRequest {
            scope: Some(proto::Scope {
                operation: intent.operation.clone(),
                key: intent.key.clone(),
            }),
            request_identity: Some(proto::claim_request::RequestIdentity::JsonPayload(
                intent.json_payload.clone(),
            )),
            claim_token: random_claim_token()?,
            lease: Some(proto_duration(intent.lease)?),
            ..Default::default()
        };
        // Leases and deadlines are counted from when the Claim was sent.
        let sent_at = Instant::now();
        let response = send(token, request, |request| {
            let mut client = client.clone();
            async move { client.claim(request).await }
        })
        .await?;
        match response.outcome {
            Some(Outcome::Acquired(acquired)) => {
                let ownership = owned(acquired.ownership)?;
                return own(client, token, intent, provider, ownership, sent_at, false).await;
            }
            Some(Outcome::ReconcileFirst(reconcile_first)) => {
                let ownership = owned(reconcile_first.ownership)?;
                return own(client, token, intent, provider, ownership, sent_at, true).await;
            }
            Some(Outcome::Pending(pending)) => {
                let retry_after = std_duration(pending.retry_after).min(MAX_PENDING_NAP);
                tokio::time::sleep(retry_after).await;
            }
            Some(Outcome::Completed(completed)) => {
                return Ok(Ending::Replayed(Box::new(completed)));
            }
            Some(Outcome::NeedsReconciliation(needs)) => {
                return Ok(Ending::NeedsReconciliation(needs));
            }
            None => return Ok(Ending::Unrecognised),
        }
    }
    Err(Status::deadline_exceeded(
        "the operation stayed pending; claim it again later",
    ))
}

/// This run owns the operation: charge (unless the provider already has the
/// earlier attempt's charge), renewing meanwhile, and record the outcome.
async fn own(
    client: &IdempotencyServiceClient<Channel>,
    token: &str,
    intent: &Intent,
    provider: &SimulatedProvider,
    ownership: proto::Ownership,
    sent_at: Instant,
    reconcile_first: bool,
) -> Result<Ending, Status> {
    // The stable reference the provider knows the charge by. A takeover asks
    // the provider first: the earlier attempt may have charged. (Finding
    // nothing proves less while that attempt may still be in flight, until
    // its deadline; a provider that takes `reference` as its own idempotency
    // key closes that gap.)
    let reference = &intent.key;
    if reconcile_first && let Some(body) = provider.find(reference) {
        return complete(client, token, &ownership, body, false).await;
    }
    let attempt_deadline = sent_at + std_duration(ownership.attempt_deadline);
    // Stop early enough to still report the outcome before the deadline.
    let stop_at = attempt_deadline - (std_duration(ownership.attempt_deadline) / 10);
    let charged = tokio::select! {
        body = provider.charge(reference) => Some(body),
        refusal = keep_renewing(client, token, &ownership, intent.lease) => {
            return superseded_or(client, token, &ownership, refusal).await;
        }
        () = tokio::time::sleep_until(stop_at) => None,
    };
    match charged {
        Some(body) => complete(client, token, &ownership, body, true).await,
        None => abandon(client, token, &ownership).await,
    }
}

async fn complete(
    client: &IdempotencyServiceClient<Channel>,
    token: &str,
    ownership: &proto::Ownership,
    body: Vec<u8>,
    charged: bool,
) -> Result<Ending, Status> {
    let request = proto::CompleteRequest {
        operation_id: ownership.operation_id.clone(),
        fence: ownership.fence,
        result: Some(proto::Result {
            body: body.clone(),
            content_type: "application/json".into(),
            metadata: Default::default(),
        }),
    };
    let completed = send(token, request, |request| {
        let mut client = client.clone();
        async move { client.complete(request).await }
    })
    .await;
    match completed {
        Ok(_) => Ok(Ending::Recorded {
            operation_id: ownership.operation_id.clone(),
            body,
            charged,
        }),
        Err(status) => superseded_or(client, token, ownership, status).await,
    }
}

/// The charge did not finish in time: cancelled, its outcome unknown.
async fn abandon(
    client: &IdempotencyServiceClient<Channel>,
    token: &str,
    ownership: &proto::Ownership,
) -> Result<Ending, Status> {
    let request = proto::FailRequest {
        operation_id: ownership.operation_id.clone(),
        fence: ownership.fence,
        disposition: proto::FailDisposition::Unknown.into(),
        error: Some(proto::OperationError {
            code: "attempt_deadline".into(),
            message: "the charge was cancelled at the attempt deadline".into(),
            ..Default::default()
        }),
        retry_after: None,
    };
    let failed = send(token, request, |request| {
        let mut client = client.clone();
        async move { client.fail(request).await }
    })
    .await;
    match failed {
        Ok(_) => Ok(Ending::Abandoned {
            operation_id: ownership.operation_id.clone(),
        }),
        Err(status) => superseded_or(client, token, ownership, status).await,
    }
}

/// Renews every third of the lease until a Renew is refused; returns the refusal.
async fn keep_renewing(
    client: &IdempotencyServiceClient<Channel>,
    token: &str,
    ownership: &proto::Ownership,
    lease: Duration,
) -> Status {
    loop {
        tokio::time::sleep(lease / 3).await;
        let request = proto::RenewRequest {
            operation_id: ownership.operation_id.clone(),
            fence: ownership.fence,
            lease: None,
        };
        let renewed = send(token, request, |request| {
            let mut client = client.clone();
            async move { client.renew(request).await }
        })
        .await;
        if let Err(status) = renewed {
            return status;
        }
    }
}

/// Told LEASE_LOST, a client looks the operation up and answers with what is
/// stored; it never redoes the effect. Other refusals are errors.
async fn superseded_or(
    client: &IdempotencyServiceClient<Channel>,
    token: &str,
    ownership: &proto::Ownership,
    status: Status,
) -> Result<Ending, Status> {
    if status.code() != Code::Aborted {
        return Err(status);
    }
    let request = proto::LookupRequest {
        target: Some(proto::lookup_request::Target::OperationId(
            ownership.operation_id.clone(),
        )),
        include_history: false,
        ..Default::default()
    };
    let found = send(token, request, |request| {
        let mut client = client.clone();
        async move { client.lookup(request).await }
    })
    .await?;
    Ok(Ending::Superseded(found.operation.map(Box::new)))
}

/// Sends `message`, and re-sends it unchanged after UNAVAILABLE (waiting as
/// RetryInfo says): every idemd RPC is safe to re-send.
async fn send<M, R, F, Fut>(token: &str, message: M, mut call: F) -> Result<R, Status>
where
    M: Clone,
    F: FnMut(Request<M>) -> Fut,
    Fut: Future<Output = Result<Response<R>, Status>>,
{
    let mut sends = 1;
    loop {
        match call(authorized(token, message.clone())?).await {
            Ok(response) => return Ok(response.into_inner()),
            Err(status) if status.code() == Code::Unavailable && sends < SENDS => {
                let delay = status
                    .get_details_retry_info()
                    .and_then(|retry| retry.retry_delay)
                    .unwrap_or(Duration::from_millis(200));
                tokio::time::sleep(delay).await;
                sends += 1;
            }
            Err(status) => return Err(status),
        }
    }
}

fn authorized<M>(token: &str, message: M) -> Result<Request<M>, Status> {
    let mut request = Request::new(message);
    let value = format!("Bearer {token}")
        .parse()
        .map_err(|_| Status::unauthenticated("the token is not printable ASCII"))?;
    request.metadata_mut().insert("authorization", value);
    Ok(request)
}

fn owned(ownership: Option<proto::Ownership>) -> Result<proto::Ownership, Status> {
    ownership.ok_or_else(|| Status::internal("the server granted ownership without details"))
}

fn random_claim_token() -> Result<Vec<u8>, Status> {
    let mut token = [0u8; 16];
    getrandom::fill(&mut token)
        .map_err(|error| Status::internal(format!("no randomness for a claim token: {error}")))?;
    Ok(token.to_vec())
}

fn proto_duration(duration: Duration) -> Result<pbjson_types::Duration, Status> {
    // pbjson-types' From would wrap a duration beyond i64 seconds.
    let seconds = i64::try_from(duration.as_secs())
        .map_err(|_| Status::invalid_argument("duration out of range"))?;
    Ok(pbjson_types::Duration {
        seconds,
        nanos: i32::try_from(duration.subsec_nanos()).unwrap_or(0),
    })
}

/// A duration the server sent; a missing or negative one counts as zero.
fn std_duration(duration: Option<pbjson_types::Duration>) -> Duration {
    duration
        .and_then(|duration| Duration::try_from(duration).ok())
        .unwrap_or_default()
}
