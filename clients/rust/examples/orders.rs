//! An agent creates an order at a provider through idemd, at most once.
//!
//! ```sh
//! cargo run --release -- serve --dev          # at the repository root, in another terminal
//! IDEMD_TOKEN=$(cat idemd-data/dev-token) cargo run -p idemd-client --example orders
//! ```
//!
//! The server comes from IDEMD_ADDR (default `http://127.0.0.1:50051`), the
//! tenant's token from IDEMD_TOKEN. The provider (simulated here) creates
//! orders and can look them up by the client reference they were created
//! with; the agent passes the operation_id as that reference.
//!
//! 1. The first attempt times out: the provider created the order, but its
//!    reply comes after the attempt deadline. The helper cancels the call and
//!    reports the outcome UNKNOWN.
//! 2. The agent retries the same intent ten times at once (each retry timed
//!    out on the agent's side too, say). One retry takes over, finds the order
//!    at the provider by its reference, and records it; the others wait and
//!    get the same result. The provider has one order.
//! 3. A retry with a changed amount under the same key is refused: conflict.
//!
//! `tests/examples.rs` runs [`run`] against a real server and checks its output.

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use idemd_client::{Client, Disposition, Error, Execution, Operation, Outcome, Payload, Source};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let address =
        std::env::var("IDEMD_ADDR").unwrap_or_else(|_| "http://127.0.0.1:50051".to_owned());
    let token = std::env::var("IDEMD_TOKEN").map_err(|_| "set IDEMD_TOKEN to a tenant's token")?;
    let client = Client::connect(&address, &token).await?;
    // One key per business intent, made once and persisted before the first
    // attempt; a fresh one per run of this example.
    let key = format!("order-{}", std::process::id());
    run(&client, &key, &mut std::io::stdout()).await
}

/// A simulated shop: it creates an order every time it is asked (keeping that
/// to once is the client's job) and finds orders by client reference.
#[derive(Debug, Clone, Default)]
pub struct Shop {
    orders: Arc<Mutex<HashMap<String, String>>>,
    created: Arc<Mutex<usize>>,
}

impl Shop {
    /// Creates an order; the order exists as soon as the call starts, the
    /// reply takes `reply_after`.
    pub async fn create_order(&self, reference: &str, reply_after: Duration) -> String {
        let order_id = {
            let mut created = self.created.lock().unwrap_or_else(PoisonError::into_inner);
            *created += 1;
            let order_id = format!("ord_{created}");
            self.orders
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(reference.to_owned(), order_id.clone());
            order_id
        };
        tokio::time::sleep(reply_after).await;
        order_id
    }

    pub fn find_by_reference(&self, reference: &str) -> Option<String> {
        self.orders
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(reference)
            .cloned()
    }

    pub fn orders_created(&self) -> usize {
        *self.created.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn order_intent(key: &str, amount: u32) -> Operation {
    Operation {
        lease: Duration::from_secs(1),
        attempt_duration: Some(Duration::from_secs(2)),
        ..Operation::new(
            "orders.create",
            key,
            Payload::Json(format!(
                r#"{{"amount":{amount},"currency":"EUR","sku":"book-42"}}"#
            )),
        )
    }
}

fn recorded(order_id: &str) -> Disposition {
    Disposition::Success(idemd_client::OperationResult {
        body: format!(r#"{{"order_id":"{order_id}"}}"#).into_bytes(),
        content_type: "application/json".into(),
        metadata: HashMap::new(),
    })
}

/// One execution of the intent: create the order with the operation_id as
/// its client reference; on a takeover, look it up by that reference first.
/// The shop does not deduplicate orders by reference, so the lookup is the
/// protection a takeover needs (a provider that honours an idempotency key
/// could be declared with `Operation::provider_deduplicates` instead): it
/// reads the shop's current orders, and a "not found" counts only from a
/// lookup started once the earlier attempt has settled.
async fn create_order_once(
    client: &Client,
    shop: &Shop,
    operation: &Operation,
    reply_after: Duration,
) -> Result<Execution, Error> {
    client
        .execute_once_with_lookup(
            operation,
            |context| {
                let shop = shop.clone();
                async move {
                    shop.find_by_reference(context.operation_id())
                        .map(|order_id| recorded(&order_id))
                }
            },
            |context| {
                let shop = shop.clone();
                async move {
                    let order_id = shop.create_order(context.operation_id(), reply_after).await;
                    recorded(&order_id)
                }
            },
        )
        .await
}

fn body(execution: &Execution) -> String {
    match &execution.outcome {
        Outcome::Succeeded(result) => String::from_utf8_lossy(&result.body).into_owned(),
        Outcome::Failed(error) => format!("failed: {}", error.code),
    }
}

/// The whole story, written to `out`.
pub async fn run(
    client: &Client,
    key: &str,
    out: &mut (dyn Write + Send),
) -> Result<(), Box<dyn std::error::Error>> {
    let shop = Shop::default();
    let intent = order_intent(key, 1000);

    // 1. The provider creates the order but answers after the attempt deadline.
    match create_order_once(client, &shop, &intent, Duration::from_secs(10)).await {
        Err(Error::OutcomeUnknown {
            operation_id,
            attempt,
            ..
        }) => writeln!(
            out,
            "first attempt: timed out, outcome unknown (operation {operation_id}, attempt {attempt})"
        )?,
        other => return Err(format!("the first attempt should time out: {other:?}").into()),
    }

    // 2. Ten concurrent retries of the same intent.
    let retries: Vec<_> = (0..10)
        .map(|_| {
            let (client, shop, intent) = (client.clone(), shop.clone(), intent.clone());
            tokio::spawn(async move {
                create_order_once(&client, &shop, &intent, Duration::from_millis(50)).await
            })
        })
        .collect();
    let mut results = Vec::new();
    for retry in retries {
        results.push(retry.await??);
    }
    let mut distinct: Vec<String> = results.iter().map(body).collect();
    distinct.sort();
    distinct.dedup();
    let count = |source| {
        results
            .iter()
            .filter(|result| result.source == source)
            .count()
    };
    writeln!(
        out,
        "retries: {} answered, {} distinct result(s): {}",
        results.len(),
        distinct.len(),
        distinct.join(", ")
    )?;
    writeln!(
        out,
        "retries: {} found the order at the provider, {} executed, {} replayed",
        count(Source::Reconciled),
        count(Source::Executed),
        count(Source::Replayed)
    )?;
    writeln!(out, "provider: {} order(s) created", shop.orders_created())?;

    // 3. The same key with another amount.
    let changed = order_intent(key, 2000);
    match create_order_once(client, &shop, &changed, Duration::from_millis(50)).await {
        Err(Error::Conflict { operation_id }) => writeln!(
            out,
            "changed amount: refused, the key belongs to operation {operation_id} (conflict)"
        )?,
        other => return Err(format!("a changed amount should conflict: {other:?}").into()),
    }
    writeln!(out, "provider: {} order(s) created", shop.orders_created())?;
    Ok(())
}
