//! Diagnose on the console's operation page (issue 23, item 1): the
//! signed-in credential's diagnosis of the record, the evidence support
//! staff select taken into account, and a plan beyond the credential shown
//! as whose move it is. Over real HTTP against a real console and server.

use crate::console_holds::{Browser, serve_console};
use crate::harness::*;

store_tests!(the_operation_page_diagnoses_with_the_sessions_scopes,);

const CHARGE: &str = "payments.charge";

async fn the_operation_page_diagnoses_with_the_sessions_scopes(backend: Backend) {
    let world = World::start(backend).await;
    let reconciler = world.tenant_a.clone();
    let reader = add_token(
        world.store.as_ref(),
        "tenant-a",
        "support-reader",
        "reconcile",
    )
    .await;
    let mut client = world.client().await;
    let lost = claim_owned(
        &mut client,
        &reconciler,
        claim_json(CHARGE, "lost", r#"{"amount": 1}"#),
    )
    .await;
    fail_unknown(&mut client, &reconciler, &lost).await;
    let before = operation_by_id(&mut client, &reconciler, &lost.operation_id).await;
    let served = serve_console(&world).await;

    // The record alone: stuck, the plan looks at the provider and
    // reconciles; a reconcile session may.
    let browser = Browser::sign_in(served.address, &reader).await;
    let page = browser
        .get(&format!("/operations/{}", lost.operation_id))
        .await;
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(page.text.contains("<h2>Diagnosis</h2>"), "{}", page.text);
    assert!(
        page.text.contains("data-cause=\"StuckInProgress\""),
        "{}",
        page.text
    );
    assert!(
        page.text.contains("data-move=\"Reconcile\""),
        "{}",
        page.text
    );

    // Selected evidence: the provider showed the effect a second ago; the
    // plan reconciles it SUCCEEDED first.
    let found = browser
        .get(&format!(
            "/operations/{}?symptom=stuck&provider=found&looked=1",
            lost.operation_id
        ))
        .await;
    let first_move = found
        .text
        .split("<ol class=\"plan\">")
        .nth(1)
        .and_then(|plan| plan.split("data-move=\"").nth(1))
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_default()
        .to_owned();
    assert_eq!(first_move, "Reconcile", "{}", found.text);

    // A negative lookup made while the attempt could still run: escalate.
    let early = browser
        .get(&format!(
            "/operations/{}?provider=not-found&looked=0",
            lost.operation_id
        ))
        .await;
    assert!(
        early.text.contains("data-verdict=\"Escalate\""),
        "{}",
        early.text
    );

    // A completed operation replays: a Claim, which a reconcile-only
    // session may not make; the page says whose move it is.
    let done = claim_owned(
        &mut client,
        &reconciler,
        claim_json(CHARGE, "done", r#"{"amount": 2}"#),
    )
    .await;
    complete(&mut client, &reconciler, &done, r#"{"charge":"ch_1"}"#).await;
    let stopped = browser
        .get(&format!(
            "/operations/{}?symptom=timeout",
            done.operation_id
        ))
        .await;
    assert!(
        stopped.text.contains("data-reason=\"PLAN_EXCEEDS_SCOPE\""),
        "{}",
        stopped.text
    );

    // Diagnosing changed nothing.
    let after = operation_by_id(&mut client, &reconciler, &lost.operation_id).await;
    assert_eq!(
        (after.state, after.fence, after.updated_at),
        (before.state, before.fence, before.updated_at)
    );
    served.stop().await;
}
