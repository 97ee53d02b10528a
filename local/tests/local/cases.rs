//! The six sequential cases, as one table: each delivery runs the
//! endpoint's whole transaction; what is counted afterwards is what
//! committed.

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use crate::app::{Answer, App, Charge, Ending};

struct Case {
    name: &'static str,
    deliveries: Vec<(Charge, Ending)>,
    /// Deliveries that ran the charge (committed or not).
    attempts: usize,
    /// Charges committed.
    effects: i64,
    /// Deliveries answered with the stored result.
    replays: usize,
    /// Deliveries refused IDEMPOTENCY_KEY_REUSED.
    conflicts: usize,
}

fn cases() -> Vec<Case> {
    use Ending::{Commit, LostBeforeCommit};
    let charge = |case, tenant, key, amount| Charge::new(case, tenant, key, amount);
    vec![
        Case {
            name: "response lost before commit",
            deliveries: vec![
                (
                    charge("lost-before", "acme", "k-lost-before", 100),
                    LostBeforeCommit,
                ),
                (charge("lost-before", "acme", "k-lost-before", 100), Commit),
            ],
            attempts: 2,
            effects: 1,
            replays: 0,
            conflicts: 0,
        },
        Case {
            name: "response lost after commit",
            deliveries: vec![
                (charge("lost-after", "acme", "k-lost-after", 100), Commit),
                (charge("lost-after", "acme", "k-lost-after", 100), Commit),
            ],
            attempts: 1,
            effects: 1,
            replays: 1,
            conflicts: 0,
        },
        Case {
            name: "the same request delivered three times",
            deliveries: vec![
                (charge("three-times", "acme", "k-three", 100), Commit),
                (charge("three-times", "acme", "k-three", 100), Commit),
                (charge("three-times", "acme", "k-three", 100), Commit),
            ],
            attempts: 1,
            effects: 1,
            replays: 2,
            conflicts: 0,
        },
        Case {
            name: "same key with a changed payload",
            deliveries: vec![
                (charge("changed-payload", "acme", "k-changed", 100), Commit),
                (charge("changed-payload", "acme", "k-changed", 999), Commit),
            ],
            attempts: 1,
            effects: 1,
            replays: 0,
            conflicts: 1,
        },
        Case {
            name: "same key under two tenants",
            deliveries: vec![
                (charge("two-tenants", "acme", "k-tenants", 100), Commit),
                (charge("two-tenants", "globex", "k-tenants", 100), Commit),
            ],
            attempts: 2,
            effects: 2,
            replays: 0,
            conflicts: 0,
        },
        Case {
            name: "a retry with a new key",
            deliveries: vec![
                (charge("new-key", "acme", "k-new-1", 100), Commit),
                (charge("new-key", "acme", "k-new-2", 100), Commit),
            ],
            // A new key is a new request: idemd cannot know it is a retry.
            attempts: 2,
            effects: 2,
            replays: 0,
            conflicts: 0,
        },
    ]
}

#[sqlx::test(migrations = false)]
async fn six_sequential_cases(_: PgPoolOptions, connect: PgConnectOptions) {
    let app = App::start(connect).await;
    for case in cases() {
        let mut attempts = 0;
        let mut replays = 0;
        let mut conflicts = 0;
        let mut committed_charge = None;
        for (charge, ending) in &case.deliveries {
            match app.charge(charge, *ending).await {
                Answer::Charged { charge_id } => {
                    attempts += 1;
                    if *ending == Ending::Commit {
                        committed_charge.get_or_insert(charge_id);
                    }
                }
                Answer::Replayed { charge_id } => {
                    replays += 1;
                    assert_eq!(
                        Some(charge_id),
                        committed_charge,
                        "{}: the replay is the committed charge's answer",
                        case.name
                    );
                }
                Answer::KeyReused => conflicts += 1,
                Answer::Other(outcome) => panic!("{}: answered {outcome:?}", case.name),
            }
        }
        let effects = app.effects(case.deliveries[0].0.case).await;
        assert_eq!(
            (attempts, effects, replays, conflicts),
            (case.attempts, case.effects, case.replays, case.conflicts),
            "{}: (attempts, effects, replays, conflicts)",
            case.name
        );
    }
    assert_eq!(app.unresolved().await, 0, "every committed operation ended");
    // The refused claim's evidence committed with its transaction, as the
    // service records it.
    let conflicts: i64 = sqlx::query_scalar(
        "SELECT conflicts FROM idemd.operations WHERE idempotency_key = 'k-changed'",
    )
    .fetch_one(&app.pool)
    .await
    .expect("the record of k-changed");
    assert_eq!(conflicts, 1);
}
