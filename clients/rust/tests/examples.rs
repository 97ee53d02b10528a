#![allow(unreachable_pub)] // the example's items are `pub` for this test
//! examples/orders.rs against the real `idemd` binary, on both stores: the
//! very function the example's `main` calls, so the example cannot rot.

mod support;

#[path = "../examples/orders.rs"]
#[expect(dead_code, reason = "the example's main runs only as the example")]
mod orders;

use support::*;

both_stores!(the_orders_example_shows_one_order_one_result_and_a_conflict);

async fn the_orders_example_shows_one_order_one_result_and_a_conflict(store: Store) {
    let world = World::start(store).await;
    let client = idemd_client::Client::connect(&world.addr().to_string(), &world.token)
        .await
        .expect("connect");
    let mut output = Vec::new();
    orders::run(&client, "order-example", &mut output)
        .await
        .expect("the example runs");
    let output = String::from_utf8(output).expect("utf-8");
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(lines.len(), 6, "{output}");
    assert!(
        lines[0].starts_with("first attempt: timed out, outcome unknown"),
        "{output}"
    );
    assert_eq!(
        lines[1], r#"retries: 10 answered, 1 distinct result(s): {"order_id":"ord_1"}"#,
        "{output}"
    );
    assert_eq!(
        lines[2], "retries: 1 found the order at the provider, 0 executed, 9 replayed",
        "{output}"
    );
    assert_eq!(lines[3], "provider: 1 order(s) created", "{output}");
    assert!(lines[4].starts_with("changed amount: refused"), "{output}");
    assert!(lines[4].ends_with("(conflict)"), "{output}");
    assert_eq!(lines[5], "provider: 1 order(s) created", "{output}");
    world.finish().await;
}
