//! A deduplicating RabbitMQ consumer: ships each order message at most once,
//! however often the broker delivers it.
//!
//! ```sh
//! cargo run --release -- serve --dev          # at the repository root, in another terminal
//! IDEMD_TOKEN=$(cat idemd-data/dev-token) AMQP_URL=amqp://guest:guest@127.0.0.1:5672/%2f \
//!   cargo run -p idemd-client --features rabbitmq --example consume_rabbitmq
//! ```
//!
//! It declares the queues `orders`, `orders.dead-letters` and `orders.parked`,
//! publishes order 1 three times (the third with another body under the same
//! message id) and consumes until the queue is empty: one shipment, one replay,
//! one dead letter named IDEMPOTENCY_KEY_REUSED.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use idemd_client::consumer::rabbitmq::{Destination, RabbitConsumer};
use idemd_client::consumer::{ConsumerSettings, Message, Verdict};
use idemd_client::{Client, Disposition, EffectContext, OperationResult};
use lapin::options::{BasicConsumeOptions, BasicPublishOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Connection, ConnectionProperties};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let address = std::env::var("IDEMD_ADDR").unwrap_or_else(|_| "http://127.0.0.1:50051".into());
    let token = std::env::var("IDEMD_TOKEN")?;
    let amqp = std::env::var("AMQP_URL")?;
    let client = Client::connect(&address, &token).await?;
    let connection = Connection::connect(&amqp, ConnectionProperties::default()).await?;
    let channel = connection.create_channel().await?;
    for queue in ["orders", "orders.dead-letters", "orders.parked"] {
        channel
            .queue_declare(
                queue.into(),
                QueueDeclareOptions::default(),
                FieldTable::default(),
            )
            .await?;
    }
    for body in [
        r#"{"order":1}"#,
        r#"{"order":1}"#,
        r#"{"order":1,"express":true}"#,
    ] {
        channel
            .basic_publish(
                "".into(),
                "orders".into(),
                BasicPublishOptions::default(),
                body.as_bytes(),
                BasicProperties::default().with_message_id("order-1".into()),
            )
            .await?;
    }

    // The message id is the idempotency key of the operation `orders.ship`;
    // the body (as canonical JSON) is its payload.
    let settings = ConsumerSettings::new("orders.ship").json_body(true);
    let consumer = RabbitConsumer::new(
        client,
        channel.clone(),
        settings,
        Destination::queue("orders.dead-letters"),
        Destination::queue("orders.parked"),
    )
    .await?;
    let ship = |context: EffectContext, message: Arc<Message>| async move {
        // The effect: pass context.operation_id() to the carrier as its
        // idempotency key, so that even a takeover cannot ship twice.
        println!(
            "shipping {} as {}",
            String::from_utf8_lossy(&message.body),
            context.operation_id()
        );
        Disposition::Success(OperationResult {
            body: br#"{"parcel":"P-1"}"#.to_vec(),
            ..Default::default()
        })
    };
    let mut deliveries = channel
        .basic_consume(
            "orders".into(),
            "shipper".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    while let Ok(Some(delivery)) =
        tokio::time::timeout(Duration::from_secs(2), deliveries.next()).await
    {
        match consumer.handle(&delivery?, &ship).await? {
            Verdict::Ack(execution) => println!("acked ({:?})", execution.source),
            Verdict::DeadLetter { reason, .. } => println!("dead-lettered: {reason}"),
            Verdict::Park { reason, .. } => println!("parked: {reason}"),
            other => println!("{other:?}"),
        }
    }
    Ok(())
}
