//! Places an order at most once per idempotency key, with the order row,
//! its idempotency record and its receipt's outbox entry in one Postgres
//! transaction (idemd-local), then does it again as a retry would.
//!
//! ```sh
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
//!   cargo run -p idemd-local --example orders -- --key order-1234 --amount 2500
//! ```
//!
//! It prints what each request got: the first places the order (and
//! enqueues its receipt), the second replays the stored answer without
//! writing anything, and a third with the same key but another amount is
//! refused as a key reuse. Run it again with the same key and every request
//! replays or is refused: the order exists once. The receipts wait in
//! `<schema>.outbox` for `idemd-local dispatch` to deliver them through the
//! idemd service (see local/README.md).

use std::error::Error as StdError;

use idemd_local::domain::{
    ClaimRequested, Error, Outcome, RequestIdentity, Scope, SuccessResult, TenantId,
};
use idemd_local::outbox::NewEntry;
use idemd_local::{Local, Schema};
use sqlx::PgPool;

const CREATE_ORDERS: &str = "CREATE TABLE IF NOT EXISTS example_orders (
    order_id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    idempotency_key TEXT NOT NULL,
    amount BIGINT NOT NULL)";

#[tokio::main]
async fn main() -> Result<(), Box<dyn StdError>> {
    let (key, amount) = arguments()?;
    let url = std::env::var("DATABASE_URL")
        .map_err(|_| "DATABASE_URL must name the application's Postgres database")?;
    let pool = PgPool::connect(&url).await?;
    let local = Local::new(Schema::new("idemd_example")?);
    local.migrate(&pool).await?;
    sqlx::query(CREATE_ORDERS).execute(&pool).await?;

    let mut transaction = pool.begin().await?;
    let tenant = local.tenant(&mut transaction, "shop").await?;
    transaction.commit().await?;

    for (request, amount) in [
        ("first", amount),
        ("retry", amount),
        ("changed", amount + 1),
    ] {
        let answer = place_order(&pool, &local, tenant, &key, amount).await?;
        println!("{request:>8} request (amount {amount}): {answer}");
    }
    let (orders,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM example_orders WHERE idempotency_key = $1")
            .bind(&key)
            .fetch_one(&pool)
            .await?;
    println!("orders under key {key}: {orders}");
    Ok(())
}

/// One request to the order endpoint: claim, insert the order, enqueue its
/// receipt, complete, commit — or replay what an earlier request committed.
async fn place_order(
    pool: &PgPool,
    local: &Local,
    tenant: TenantId,
    key: &str,
    amount: i64,
) -> Result<String, Box<dyn StdError>> {
    let mut transaction = pool.begin().await?;
    let claimed = match local
        .claim(&mut transaction, tenant, request(key, amount))
        .await
    {
        Ok(claimed) => claimed,
        Err(Error::KeyReused { operation_id }) => {
            return Ok(format!(
                "refused: key {key} was used for another request (operation {operation_id})"
            ));
        }
        Err(error) => return Err(error.into()),
    };
    if let Some(stored) = claimed.replayed() {
        // Nothing was written: the transaction only read.
        return Ok(match stored {
            Outcome::Succeeded(result) => {
                format!("replayed {}", String::from_utf8_lossy(&result.body))
            }
            Outcome::Failed { error, .. } => format!("replayed the failure {}", error.code),
        });
    }
    if !claimed.acquired() {
        return Ok(format!("not executed: {:?}", claimed.outcome()));
    }
    let (order_id,): (i64,) = sqlx::query_as(
        "INSERT INTO example_orders (idempotency_key, amount) VALUES ($1, $2) RETURNING order_id",
    )
    .bind(key)
    .bind(amount)
    .fetch_one(&mut *transaction)
    .await?;
    let body = format!(r#"{{"order_id":{order_id}}}"#);
    local
        .enqueue(
            &mut transaction,
            NewEntry {
                operation: "receipts.send".into(),
                recipient: "http://127.0.0.1:8080/receipts".into(),
                payload: body.clone().into_bytes(),
            },
        )
        .await?;
    local
        .complete(
            &mut transaction,
            &claimed,
            SuccessResult {
                body: body.clone().into_bytes(),
                content_type: "application/json".into(),
                metadata: Default::default(),
            },
        )
        .await?;
    transaction.commit().await?;
    Ok(format!("placed {body}, receipt enqueued"))
}

fn request(key: &str, amount: i64) -> ClaimRequested {
    ClaimRequested {
        scope: Some(Scope {
            operation: "orders.place".into(),
            key: key.into(),
        }),
        identity: Some(RequestIdentity::JsonPayload(format!(
            r#"{{"amount":{amount}}}"#
        ))),
        claim_token: Vec::new(),
        lease: None,
        max_attempt_duration: None,
        max_attempts: 0,
        retention: None,
        operation_deadline: None,
        wait: None,
        previous_fingerprints: Vec::new(),
    }
}

/// `--key K` (default: a fresh one) and `--amount N` (default 2500).
fn arguments() -> Result<(String, i64), Box<dyn StdError>> {
    let mut key = format!("order-{}", uuid::Uuid::new_v4());
    let mut amount = 2500;
    let mut arguments = std::env::args().skip(1);
    while let Some(flag) = arguments.next() {
        let value = arguments.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--key" => key = value,
            "--amount" => amount = value.parse()?,
            _ => return Err(format!("unknown flag {flag}: --key K --amount N").into()),
        }
    }
    Ok((key, amount))
}
