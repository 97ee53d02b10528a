//! What idemd-local costs per operation: a claim, the business insert and a
//! complete in one transaction, against the same business insert alone in
//! its transaction, on one connection, in the same run (interleaved rounds,
//! so that both see the same database and machine). Prints both latencies
//! and their ratio. See bench/README.md ("idemd-local's cost").
//!
//! ```sh
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
//!   cargo bench -p idemd-local --bench local_cost -- --operations 2000
//! ```
//!
//! It creates a database of its own on DATABASE_URL's server and drops it
//! at the end.

use std::str::FromStr;
use std::time::{Duration, Instant};

use idemd::domain::{ClaimRequested, RequestIdentity, Scope, SuccessResult};
use idemd_local::{Local, Schema};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection};

/// Operations per round of each kind; rounds alternate the two kinds.
const ROUND: usize = 100;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let operations = operations_flag()?;
    let url = std::env::var("DATABASE_URL")
        .map_err(|_| "DATABASE_URL names the Postgres server to measure on")?;
    let admin = PgConnectOptions::from_str(&url)?;
    let database = format!("idemd_local_bench_{}", std::process::id());
    let mut server = PgConnection::connect_with(&admin).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {database}")))
        .execute(&mut server)
        .await?;
    let measured = measure(admin.clone().database(&database), operations).await;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE {database} WITH (FORCE)"
    )))
    .execute(&mut server)
    .await?;
    let (alone, with_local) = measured?;
    let per_op = |total: Duration| total.as_secs_f64() * 1e6 / operations as f64;
    println!("operations of each kind: {operations} (one connection, rounds of {ROUND})");
    println!(
        "business insert alone:                     {:8.1} µs/op",
        per_op(alone)
    );
    println!(
        "claim + business insert + complete:        {:8.1} µs/op",
        per_op(with_local)
    );
    println!(
        "ratio (idemd-local's cost per operation):  {:8.2}x",
        with_local.as_secs_f64() / alone.as_secs_f64()
    );
    Ok(())
}

fn operations_flag() -> Result<usize, Box<dyn std::error::Error>> {
    let mut arguments = std::env::args().skip(1);
    let mut operations = 2000;
    while let Some(argument) = arguments.next() {
        match argument.as_str() {
            "--operations" => {
                operations = arguments
                    .next()
                    .ok_or("--operations needs a number")?
                    .parse()?;
            }
            // cargo bench passes --bench to every bench target.
            "--bench" => {}
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(operations.max(ROUND))
}

async fn measure(
    connect: PgConnectOptions,
    operations: usize,
) -> Result<(Duration, Duration), Box<dyn std::error::Error>> {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(connect)
        .await?;
    let local = Local::new(Schema::new("idemd")?);
    local.migrate(&pool).await?;
    sqlx::query(
        "CREATE TABLE charges (charge_id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, \
         idempotency_key TEXT NOT NULL, amount BIGINT NOT NULL)",
    )
    .execute(&pool)
    .await?;
    let tenant = {
        let mut transaction = pool.begin().await?;
        let tenant = local.tenant(&mut transaction, "bench").await?;
        transaction.commit().await?;
        tenant
    };
    let (mut alone, mut with_local) = (Duration::ZERO, Duration::ZERO);
    let mut done = 0;
    while done < operations {
        let round = ROUND.min(operations - done);
        let started = Instant::now();
        for n in done..done + round {
            let mut transaction = pool.begin().await?;
            insert(&mut transaction, &format!("alone-{n}")).await?;
            transaction.commit().await?;
        }
        alone += started.elapsed();
        let started = Instant::now();
        for n in done..done + round {
            let key = format!("local-{n}");
            let mut transaction = pool.begin().await?;
            let claimed = local.claim(&mut transaction, tenant, claim(&key)).await?;
            if !claimed.acquired() {
                return Err(format!("{key} was not acquired: {:?}", claimed.outcome()).into());
            }
            let charge_id = insert(&mut transaction, &key).await?;
            let result = SuccessResult {
                body: charge_id.to_string().into_bytes(),
                content_type: "text/plain".into(),
                metadata: Default::default(),
            };
            local.complete(&mut transaction, &claimed, result).await?;
            transaction.commit().await?;
        }
        with_local += started.elapsed();
        done += round;
    }
    pool.close().await;
    Ok((alone, with_local))
}

async fn insert(
    transaction: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    key: &str,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "INSERT INTO charges (idempotency_key, amount) VALUES ($1, 100) RETURNING charge_id",
    )
    .bind(key)
    .fetch_one(&mut **transaction)
    .await
}

fn claim(key: &str) -> ClaimRequested {
    ClaimRequested {
        scope: Some(Scope {
            operation: "payments.charge".into(),
            key: key.into(),
        }),
        identity: Some(RequestIdentity::JsonPayload(r#"{"amount":100}"#.into())),
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
