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
//! A takeover (ReconcileFirst: an earlier attempt may have charged) is where
//! a charge can happen twice, so the call site says how it is protected
//! ([`Takeover`]), and there is no default: this provider charges every time
//! it is asked, so `main` looks the earlier charge up first
//! (`Takeover::LookUpFirst`); with a provider that honours the reference as
//! its idempotency key, `Takeover::ProviderDeduplicates` charges at once.
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

    // The simulated provider does not deduplicate: a takeover asks it first.
    let takeover = Takeover::LookUpFirst;
    let first = charge_once(&client, &flags.token, &intent, &provider, takeover).await?;
    println!("first run: {first}");
    let retry = charge_once(&client, &flags.token, &intent, &provider, takeover).await?;
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

/// How a takeover (ReconcileFirst: an earlier attempt's outcome is unknown,
/// it may have charged) keeps from charging twice. The caller chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takeover {
    /// Ask the provider for the earlier attempt's charge (by the reference)
    /// before charging. A charge found is recorded. "Not found" counts only
    /// if the lookup was started once the earlier attempt had settled (its
    /// deadline, `previous_attempt_deadline` counted from the Claim's reply):
    /// a lookup reads the provider at some moment between its start and its
    /// answer, and until that deadline the earlier charge may still land.
    /// The lookup must read the provider's current state (no cache, no
    /// lagging replica).
    LookUpFirst,
    /// The provider honours the reference as its idempotency key: asked
    /// again, it answers with the earlier charge instead of charging twice.
    ProviderDeduplicates,
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
/// which charge a reference got, as a new owner must ask before charging again;
/// or, built with [`SimulatedProvider::deduplicating`], it honours the
/// reference as an idempotency key.
#[derive(Debug, Clone)]
pub struct SimulatedProvider {
    latency: Duration,
    honours_reference_as_key: bool,
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
            honours_reference_as_key: false,
            charges: Arc::default(),
        }
    }

    /// A provider that takes the reference as its idempotency key.
    pub fn deduplicating(latency: Duration) -> Self {
        Self {
            honours_reference_as_key: true,
            ..Self::new(latency)
        }
    }

    /// Charges once more (or, deduplicating, answers with the reference's
    /// earlier charge). Takes effect when it returns: cancelled before that,
    /// nothing was charged.
    pub async fn charge(&self, reference: &str) -> Vec<u8> {
        tokio::time::sleep(self.latency).await;
        let mut charges = self.charges.lock().unwrap_or_else(PoisonError::into_inner);
        if self.honours_reference_as_key
            && let Some(earlier) = charges.iter().find(|charge| charge.reference == reference)
        {
            return earlier.body.clone();
        }
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
/// when this run owns the operation (on ReconcileFirst, as `takeover` says);
/// Renew while charging; Complete; never charge on any other outcome. An
/// error is an answer the protocol does not cover (the key reused with
/// another request, bad credentials): nothing was charged by this run.
pub async fn charge_once(
    client: &IdempotencyServiceClient<Channel>,
    token: &str,
    intent: &Intent,
    provider: &SimulatedProvider,
    takeover: Takeover,
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
        // Leases and this attempt's deadline are counted from when the Claim
        // was sent (the early end); the earlier attempt's deadline from when
        // the reply came (the late end).
        let sent_at = Instant::now();
        let response = send(token, request, |request| {
            let mut client = client.clone();
            async move { client.claim(request).await }
        })
        .await?;
        let received_at = Instant::now();
        let owner = Owner {
            client,
            token,
            intent,
            provider,
        };
        match response.outcome {
            Some(Outcome::Acquired(acquired)) => {
                let ownership = owned(acquired.ownership)?;
                if let Some(ending) = owner.own(ownership, sent_at, None).await? {
                    return Ok(ending);
                }
            }
            Some(Outcome::ReconcileFirst(reconcile_first)) => {
                let ownership = owned(reconcile_first.ownership)?;
                // Absent only from a server older than the field: then the
                // earlier attempt began before this one and lasts as long,
                // so it is over a whole attempt duration after this reply.
                let left = reconcile_first
                    .previous_attempt_deadline
                    .or(ownership.attempt_deadline);
                let doubt = Doubt {
                    settles_at: received_at + std_duration(left),
                    takeover,
                };
                if let Some(ending) = owner.own(ownership, sent_at, Some(doubt)).await? {
                    return Ok(ending);
                }
                // Declined: this attempt ended before the earlier one
                // settled; the next Claim is told the same doubt.
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

/// An earlier attempt whose charge may have happened, and what to do about it.
#[derive(Debug, Clone, Copy)]
struct Doubt {
    /// When the earlier attempt is over (its deadline, local clock): no
    /// charge of its can land after this.
    settles_at: Instant,
    takeover: Takeover,
}

/// What one owned attempt needs.
struct Owner<'a> {
    client: &'a IdempotencyServiceClient<Channel>,
    token: &'a str,
    intent: &'a Intent,
    provider: &'a SimulatedProvider,
}

impl Owner<'_> {
    /// This run owns the operation: charge (unless the provider already has
    /// the earlier attempt's charge), renewing meanwhile, and record the
    /// outcome. `None`: declined (Fail NOT_STARTED), claim again.
    async fn own(
        &self,
        ownership: proto::Ownership,
        sent_at: Instant,
        doubt: Option<Doubt>,
    ) -> Result<Option<Ending>, Status> {
        let (client, token) = (self.client, self.token);
        // The stable reference the provider knows the charge by.
        let reference = &self.intent.key;
        let attempt_duration = std_duration(ownership.attempt_deadline);
        let attempt_deadline = sent_at + attempt_duration;
        // Stop early enough to still report the outcome before the deadline.
        let stop_at = attempt_deadline - attempt_duration / 10;
        // After waiting for an earlier attempt, start no charge later than
        // this: it needs time to finish before `stop_at`.
        let start_by = stop_at - attempt_duration / 10;
        if let Some(Doubt {
            settles_at,
            takeover: Takeover::LookUpFirst,
        }) = doubt
        {
            loop {
                if Instant::now() >= start_by {
                    // The earlier attempt outlasts what this one can wait:
                    // hand its doubt on (NOT_STARTED keeps the earlier
                    // deadline); the next attempt ends later and waits it out.
                    return decline(client, token, &ownership).await;
                }
                // Taken before asking: the earliest moment the answer may
                // describe.
                let asked_at = Instant::now();
                if let Some(body) = self.provider.find(reference) {
                    return complete(client, token, &ownership, body, false)
                        .await
                        .map(Some);
                }
                if asked_at >= settles_at {
                    break; // "not found" from after the earlier attempt: it counts
                }
                // Until then its charge may still land: wait (renewing, which
                // keeps other callers Pending) and ask again.
                tokio::select! {
                    () = tokio::time::sleep_until(settles_at.min(start_by)) => {}
                    refusal = keep_renewing(client, token, &ownership, self.intent.lease) => {
                        return superseded_or(client, token, &ownership, refusal).await.map(Some);
                    }
                }
            }
        }
        // No doubt, a lookup that counted, or (Takeover::ProviderDeduplicates)
        // a provider that answers a repeated reference with its first charge.
        let charged = tokio::select! {
            body = self.provider.charge(reference) => Some(body),
            refusal = keep_renewing(client, token, &ownership, self.intent.lease) => {
                return superseded_or(client, token, &ownership, refusal).await.map(Some);
            }
            () = tokio::time::sleep_until(stop_at) => None,
        };
        match charged {
            Some(body) => complete(client, token, &ownership, body, true)
                .await
                .map(Some),
            None => abandon(client, token, &ownership).await.map(Some),
        }
    }
}

/// The charge was not started: Fail NOT_STARTED hands the operation on as it
/// was before this attempt. `None`: claim again.
async fn decline(
    client: &IdempotencyServiceClient<Channel>,
    token: &str,
    ownership: &proto::Ownership,
) -> Result<Option<Ending>, Status> {
    let request = proto::FailRequest {
        operation_id: ownership.operation_id.clone(),
        fence: ownership.fence,
        disposition: proto::FailDisposition::NotStarted.into(),
        error: Some(proto::OperationError {
            code: "not_started".into(),
            message: "an earlier attempt may still charge after this one ends".into(),
            ..Default::default()
        }),
        retry_after: None,
    };
    let declined = send(token, request, |request| {
        let mut client = client.clone();
        async move { client.fail(request).await }
    })
    .await;
    match declined {
        Ok(_) => Ok(None),
        Err(status) => superseded_or(client, token, ownership, status)
            .await
            .map(Some),
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
