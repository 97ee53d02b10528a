//! The application under test: an endpoint that charges once per request,
//! its idempotency record and its charge in one transaction.

use idemd::domain::{
    ClaimOutcome, ClaimRequested, Error, OperationRecord, Outcome, RequestIdentity, Scope,
    SuccessResult, TenantId,
};
use idemd_local::{Claimed, Local, Schema};
use sqlx::Transaction;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, Postgres};

/// Where idemd-local's tables go in these tests.
pub(crate) const SCHEMA: &str = "idemd";

/// The application's own table, in its own schema (`public`), named
/// unqualified: it must resolve there between idemd-local's calls.
const CREATE_CHARGES: &str = "CREATE TABLE charges (
    charge_id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    case_name TEXT NOT NULL,
    tenant TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    amount BIGINT NOT NULL)";

/// One request to the endpoint.
#[derive(Debug, Clone)]
pub(crate) struct Charge {
    pub case: &'static str,
    pub tenant: String,
    pub key: String,
    pub amount: i64,
}

impl Charge {
    pub(crate) fn new(case: &'static str, tenant: &str, key: &str, amount: i64) -> Self {
        Self {
            case,
            tenant: tenant.into(),
            key: key.into(),
            amount,
        }
    }

    pub(crate) fn claim_requested(&self) -> ClaimRequested {
        ClaimRequested {
            scope: Some(Scope {
                operation: "payments.charge".into(),
                key: self.key.clone(),
            }),
            identity: Some(RequestIdentity::JsonPayload(format!(
                r#"{{"amount":{}}}"#,
                self.amount
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
}

/// How a delivery's transaction ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    Commit,
    /// The response is lost before the commit (the process died, the
    /// connection dropped): the transaction rolls back.
    LostBeforeCommit,
}

/// What the endpoint answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// This delivery charged (its transaction then committed or not).
    Charged { charge_id: i64 },
    /// An earlier delivery had charged: its stored answer.
    Replayed { charge_id: i64 },
    /// IDEMPOTENCY_KEY_REUSED: the key's request was another one.
    KeyReused,
    /// Anything else the claim answered.
    Other(ClaimOutcome),
}

pub(crate) struct App {
    pub pool: PgPool,
    pub local: Local,
}

impl App {
    pub(crate) async fn start(connect: PgConnectOptions) -> Self {
        let pool = PgPoolOptions::new()
            .max_connections(80)
            .connect_with(connect)
            .await
            .expect("the test database accepts connections");
        let local = Local::new(Schema::new(SCHEMA).expect("a valid schema name"));
        local
            .migrate(&pool)
            .await
            .expect("migrated into the schema");
        sqlx::query(CREATE_CHARGES)
            .execute(&pool)
            .await
            .expect("the application's table");
        Self { pool, local }
    }

    /// The tenant, created in a transaction of its own.
    pub(crate) async fn tenant(&self, name: &str) -> TenantId {
        let mut transaction = self.pool.begin().await.expect("begin");
        let tenant = self
            .local
            .tenant(&mut transaction, name)
            .await
            .expect("tenant");
        transaction.commit().await.expect("commit");
        tenant
    }

    /// One delivery of `charge`: claim, charge, complete, in one
    /// transaction that ends as `ending` says.
    pub(crate) async fn charge(&self, charge: &Charge, ending: Ending) -> Answer {
        let mut transaction = self.pool.begin().await.expect("begin");
        let tenant = self
            .local
            .tenant(&mut transaction, &charge.tenant)
            .await
            .expect("tenant");
        let answer = self
            .charge_in(&mut transaction, tenant, charge)
            .await
            .expect("the endpoint answers");
        match ending {
            Ending::Commit => transaction.commit().await.expect("commit"),
            Ending::LostBeforeCommit => transaction.rollback().await.expect("rollback"),
        }
        answer
    }

    /// The endpoint's work inside `transaction`.
    pub(crate) async fn charge_in(
        &self,
        transaction: &mut Transaction<'_, Postgres>,
        tenant: TenantId,
        charge: &Charge,
    ) -> Result<Answer, Error> {
        let claimed = match self
            .local
            .claim(transaction, tenant, charge.claim_requested())
            .await
        {
            Ok(claimed) => claimed,
            // The refusal is counted on the record, in this transaction:
            // committed, it is the service's conflict evidence.
            Err(Error::KeyReused { .. }) => return Ok(Answer::KeyReused),
            Err(error) => return Err(error),
        };
        if let Some(outcome) = claimed.replayed() {
            return Ok(Answer::Replayed {
                charge_id: charge_id_of(outcome),
            });
        }
        if !claimed.acquired() {
            return Ok(Answer::Other(claimed.outcome()));
        }
        let charge_id = insert_charge(transaction, charge).await;
        self.complete(transaction, &claimed, charge_id).await?;
        Ok(Answer::Charged { charge_id })
    }

    pub(crate) async fn complete(
        &self,
        transaction: &mut Transaction<'_, Postgres>,
        claimed: &Claimed,
        charge_id: i64,
    ) -> Result<OperationRecord, Error> {
        let result = SuccessResult {
            body: charge_id.to_string().into_bytes(),
            content_type: "text/plain".into(),
            metadata: Default::default(),
        };
        self.local.complete(transaction, claimed, result).await
    }

    /// Committed charges of a case.
    pub(crate) async fn effects(&self, case: &str) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM charges WHERE case_name = $1")
            .bind(case)
            .fetch_one(&self.pool)
            .await
            .expect("count charges")
    }

    /// Committed idempotency records of a key, in every tenant.
    pub(crate) async fn records(&self, key: &str) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM idemd.operations WHERE idempotency_key = $1")
            .bind(key)
            .fetch_one(&self.pool)
            .await
            .expect("count operations")
    }

    /// Committed records a reconciler would have to look at: not ended.
    pub(crate) async fn unresolved(&self) -> i64 {
        sqlx::query_scalar(
            "SELECT count(*) FROM idemd.operations \
             WHERE state NOT IN ('succeeded', 'failed', 'expired')",
        )
        .fetch_one(&self.pool)
        .await
        .expect("count unresolved operations")
    }
}

pub(crate) async fn insert_charge(
    transaction: &mut Transaction<'_, Postgres>,
    charge: &Charge,
) -> i64 {
    sqlx::query_scalar(
        "INSERT INTO charges (case_name, tenant, idempotency_key, amount) \
         VALUES ($1, $2, $3, $4) RETURNING charge_id",
    )
    .bind(charge.case)
    .bind(&charge.tenant)
    .bind(&charge.key)
    .bind(charge.amount)
    .fetch_one(&mut **transaction)
    .await
    .expect("the charge is inserted")
}

fn charge_id_of(outcome: &Outcome) -> i64 {
    match outcome {
        Outcome::Succeeded(result) => std::str::from_utf8(&result.body)
            .ok()
            .and_then(|body| body.parse().ok())
            .expect("the stored result is a charge id"),
        Outcome::Failed { .. } => panic!("no charge failed in these tests: {outcome:?}"),
    }
}
