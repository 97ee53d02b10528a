//! Charges a customer at most once through idemd, with the Rust client
//! (`idemd-client`): its `execute_once` runs the client protocol
//! (docs/client-protocol.md); this example only says what the charge is and
//! how a takeover can tell whether an earlier attempt charged.
//!
//! ```sh
//! cargo run --release -- serve --dev        # in another terminal
//! IDEMD_TOKEN=$(cat idemd-data/dev-token) cargo run --example charge_once
//! ```
//!
//! (The example belongs to the client's package, clients/rust/Cargo.toml;
//! `cargo run --example charge_once` at the repository root finds it.) The
//! address and token come from `--addr`/`IDEMD_ADDR` (default
//! `http://127.0.0.1:50051`) and `--token`/`IDEMD_TOKEN`; `--key` is the
//! idempotency key and `--charge-ms` how long the simulated charge takes. It
//! executes one business intent (operation `payments.charge`, a stable key, a
//! JSON request): the client charges a simulated provider only when it owns
//! the operation, renews the lease while the charge runs, and completes with
//! the provider's answer. Then it executes the same intent again, as a retry
//! after a crash would, and prints the replayed result: the provider was
//! charged once. Run it again with the same key and both runs replay.
//!
//! A takeover (ReconcileFirst: an earlier attempt may have charged) is where
//! a charge can happen twice, so the call site says how it is protected
//! ([`Takeover`]), and there is no default: this provider charges every time
//! it is asked, so `main` looks the earlier charge up first
//! (`Takeover::LookUpFirst`); with a provider that honours the reference as
//! its idempotency key, `Takeover::ProviderDeduplicates` charges at once.
//!
//! `clients/rust/tests/charge_once.rs` runs these same functions against a
//! test server on both stores, so the example cannot drift.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use idemd_client::{
    Client, Disposition, EffectContext, Error, Execution, Operation, OperationResult, Outcome,
    Payload, Source,
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let flags = Flags::parse()?;
    let client = Client::connect(&flags.addr, &flags.token).await?;
    let intent = Intent {
        operation: "payments.charge".into(),
        key: flags.key,
        json_payload: r#"{"amount":1000,"currency":"EUR"}"#.into(),
        lease: Duration::from_secs(2),
    };
    let provider = SimulatedProvider::new(flags.charge_time);

    // The simulated provider does not deduplicate: a takeover asks it first.
    let takeover = Takeover::LookUpFirst;
    let first = charge_once(&client, &intent, &provider, takeover).await?;
    println!("first run: {}", describe(&first));
    let retry = charge_once(&client, &intent, &provider, takeover).await?;
    println!(
        "second run, a retry of the same intent: {}",
        describe(&retry)
    );
    println!(
        "the provider was charged {} time(s) by this process",
        provider.charges()
    );
    Ok(())
}

/// The command line: `--addr`, `--token`, `--key`, `--charge-ms` (each also
/// `--name=value`); the address and token also from the environment.
struct Flags {
    addr: String,
    token: String,
    key: String,
    charge_time: Duration,
}

impl Flags {
    fn parse() -> Result<Self, String> {
        let mut flags = Self {
            addr: std::env::var("IDEMD_ADDR").unwrap_or_else(|_| "http://127.0.0.1:50051".into()),
            token: std::env::var("IDEMD_TOKEN").unwrap_or_default(),
            key: "example-order-1".into(),
            charge_time: Duration::from_secs(3),
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let (name, value) = match arg.split_once('=') {
                Some((name, value)) => (name.to_owned(), value.to_owned()),
                None => (
                    arg.clone(),
                    args.next().ok_or(format!("{arg} needs a value"))?,
                ),
            };
            match name.as_str() {
                "--addr" => flags.addr = value,
                "--token" => flags.token = value,
                "--key" => flags.key = value,
                "--charge-ms" => {
                    let millis = value
                        .parse()
                        .map_err(|_| format!("--charge-ms: not a number: {value}"))?;
                    flags.charge_time = Duration::from_millis(millis);
                }
                _ => {
                    return Err(format!(
                        "unknown flag {name} (--addr, --token, --key, --charge-ms)"
                    ));
                }
            }
        }
        if flags.token.is_empty() {
            return Err("a tenant's token is needed: --token or IDEMD_TOKEN".into());
        }
        Ok(flags)
    }
}

/// One business intent: the same scope and request on every attempt.
#[derive(Debug, Clone)]
pub struct Intent {
    pub operation: String,
    pub key: String,
    pub json_payload: String,
    /// The lease asked for; renewed a third into each grant while the
    /// charge runs.
    pub lease: Duration,
}

/// How a takeover (ReconcileFirst: an earlier attempt's outcome is unknown,
/// it may have charged) keeps from charging twice. The caller chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takeover {
    /// Ask the provider for the earlier attempt's charge (by the reference)
    /// before charging ([`Client::execute_once_with_lookup`]). A charge found
    /// is recorded. "Not found" counts only if the lookup was started once
    /// the earlier attempt had settled (its deadline): a lookup reads the
    /// provider at some moment between its start and its answer, and until
    /// that deadline the earlier charge may still land. The lookup must read
    /// the provider's current state (no cache, no lagging replica).
    LookUpFirst,
    /// The provider honours the reference as its idempotency key: asked
    /// again, it answers with the earlier charge instead of charging twice
    /// ([`Operation::provider_deduplicates`]).
    ProviderDeduplicates,
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

/// Executes `intent` once: the client claims it, charges `provider` only
/// when this call owns the operation (on a takeover, as `takeover` says),
/// renews the lease while charging, and records the charge; a retry of the
/// same intent replays it. The provider knows each charge by the
/// operation's id, the same on every attempt.
pub async fn charge_once(
    client: &Client,
    intent: &Intent,
    provider: &SimulatedProvider,
    takeover: Takeover,
) -> Result<Execution, Error> {
    let operation = Operation {
        lease: intent.lease,
        provider_deduplicates: takeover == Takeover::ProviderDeduplicates,
        ..Operation::new(
            intent.operation.clone(),
            intent.key.clone(),
            Payload::Json(intent.json_payload.clone()),
        )
    };
    let charge = |context: EffectContext| {
        let provider = provider.clone();
        async move { charged(provider.charge(context.operation_id()).await) }
    };
    match takeover {
        Takeover::LookUpFirst => {
            let look_up = |context: EffectContext| {
                let provider = provider.clone();
                async move { provider.find(context.operation_id()).map(charged) }
            };
            client
                .execute_once_with_lookup(&operation, look_up, charge)
                .await
        }
        Takeover::ProviderDeduplicates => client.execute_once(&operation, charge).await,
    }
}

/// A charge the provider made, as the operation's result.
fn charged(body: Vec<u8>) -> Disposition {
    Disposition::Success(OperationResult {
        body,
        content_type: "application/json".into(),
        ..Default::default()
    })
}

/// How an execution came by its outcome, in a line.
pub fn describe(execution: &Execution) -> String {
    let how = match execution.source {
        Source::Executed => "charged and recorded",
        Source::Reconciled => "found the earlier attempt's charge and recorded",
        Source::Replayed => "replayed; nothing executed",
        Source::Superseded => "taken over; what the new owner stored",
    };
    let outcome = match &execution.outcome {
        Outcome::Succeeded(result) => String::from_utf8_lossy(&result.body).into_owned(),
        Outcome::Failed(error) => format!("failed: {}", error.code),
    };
    format!(
        "operation {} (attempt {}): {how}: {outcome}",
        execution.operation_id, execution.attempt
    )
}
