//! NATS JetStream: ack-wait expiry and nak redeliver, the consumer replays;
//! a business reference (not the Nats-Msg-Id, which JetStream itself
//! deduplicates) conflicts and is dead-lettered.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, AckKind, consumer::pull, stream};
use futures_util::StreamExt;
use idemd_client::Source;
use idemd_client::consumer::jetstream::JetStreamConsumer;
use idemd_client::consumer::{ConsumerSettings, Identity, Message, Verdict, headers};
use tokio::time::timeout;

use super::brokers;
use super::support::{Store, World};
use super::{Effects, unique};

const MESSAGES: usize = 3;

struct Setup {
    context: jetstream::Context,
    subject: String,
    dead_letters: String,
    parking: String,
    consumer: jetstream::consumer::Consumer<pull::Config>,
    settled_stream: String,
}

async fn setup(url: &str, ack_wait: Duration) -> Setup {
    let nats = async_nats::connect(url).await.expect("nats connect");
    let context = jetstream::new(nats);
    let name = unique("work");
    let subject = format!("{name}.orders");
    let stream = context
        .create_stream(stream::Config {
            name: name.clone(),
            subjects: vec![subject.clone()],
            ..Default::default()
        })
        .await
        .expect("stream");
    // Dead letters and parked messages in a stream of their own.
    let settled_stream = unique("settled");
    let dead_letters = format!("{settled_stream}.dead");
    let parking = format!("{settled_stream}.parked");
    context
        .create_stream(stream::Config {
            name: settled_stream.clone(),
            subjects: vec![dead_letters.clone(), parking.clone()],
            ..Default::default()
        })
        .await
        .expect("settled stream");
    let consumer = stream
        .create_consumer(pull::Config {
            durable_name: Some(unique("shipper")),
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            ack_wait,
            ..Default::default()
        })
        .await
        .expect("consumer");
    Setup {
        context,
        subject,
        dead_letters,
        parking,
        consumer,
        settled_stream,
    }
}

async fn publish(setup: &Setup, message_id: &str, body: &str) {
    let mut headers = HeaderMap::new();
    headers.insert(async_nats::header::NATS_MESSAGE_ID, message_id);
    setup
        .context
        .publish_with_headers(setup.subject.clone(), headers, body.to_owned().into())
        .await
        .expect("publish")
        .await
        .expect("stored");
}

async fn next(messages: &mut pull::Stream) -> jetstream::Message {
    timeout(Duration::from_secs(20), messages.next())
        .await
        .expect("a message within 20 s")
        .expect("the stream goes on")
        .expect("a message")
}

fn dedup(
    world_client: idemd_client::Client,
    setup: &Setup,
    settings: ConsumerSettings,
) -> JetStreamConsumer {
    JetStreamConsumer::new(
        world_client,
        setup.context.clone(),
        settings,
        setup.dead_letters.clone(),
        setup.parking.clone(),
    )
}

/// How many times each message was delivered, by its Nats-Msg-Id.
fn count_delivery(seen: &mut HashMap<String, u64>, message: &jetstream::Message) -> (u64, u64) {
    let delivered = message.info().expect("info").delivered;
    let delivered = u64::try_from(delivered).expect("a count");
    let id = message
        .headers
        .as_ref()
        .and_then(|headers| headers.get(async_nats::header::NATS_MESSAGE_ID))
        .map(|id| id.as_str().to_owned())
        .expect("a message id");
    let ours = seen.entry(id).or_default();
    *ours += 1;
    (*ours, delivered)
}

/// Every message is decided (effect recorded) and then `first_answer` is
/// what JetStream hears (nothing, or a nak) `times` times; the delivery
/// after that replays and acks.
async fn redeliveries_replay(first_answer: Option<AckKind>, times: u64, ack_wait: Duration) {
    let Some(broker) = brokers::nats().await else {
        return;
    };
    let world = World::start(Store::Embedded).await;
    let setup = setup(&broker.url, ack_wait).await;
    for number in 0..MESSAGES {
        publish(&setup, &format!("m-{number}"), &format!("order-{number}")).await;
    }
    let effects = Effects::default();
    let handler = effects.handler();
    let consumer = dedup(
        world.client().await,
        &setup,
        ConsumerSettings::new("shipments.create"),
    );
    let mut messages = setup.consumer.messages().await.expect("messages");
    let mut seen = HashMap::new();
    let mut redeliveries = 0;
    let mut acked = 0;
    while acked < MESSAGES {
        let message = next(&mut messages).await;
        let (ours, delivered) = count_delivery(&mut seen, &message);
        assert_eq!(ours, delivered, "JetStream's count is the deliveries seen");
        redeliveries += u64::from(delivered > 1);
        let verdict = consumer.decide(&message, &handler).await;
        let Verdict::Ack(execution) = &verdict else {
            panic!("{verdict:?}");
        };
        let expected = if delivered == 1 {
            Source::Executed
        } else {
            Source::Replayed
        };
        assert_eq!(execution.source, expected);
        if delivered <= times {
            if let Some(kind) = first_answer {
                message.ack_with(kind).await.expect("nak");
            }
            // None: no answer at all; ack-wait expires and JetStream
            // redelivers.
        } else {
            consumer.settle(&message, &verdict).await.expect("ack");
            acked += 1;
        }
    }
    eprintln!(
        "jetstream ({}): {redeliveries} redeliveries seen, {} effects",
        if first_answer.is_some() {
            "nak"
        } else {
            "ack-wait"
        },
        effects.total()
    );
    assert_eq!(redeliveries, MESSAGES as u64 * times);
    assert!(seen.values().all(|count| *count == times + 1), "{seen:?}");
    assert_eq!(effects.total(), MESSAGES);
    for number in 0..MESSAGES {
        assert_eq!(effects.of(&format!("order-{number}")), 1);
    }
    // Nothing left unacknowledged.
    let mut consumer_info = setup.consumer.clone();
    let info = consumer_info.info().await.expect("consumer info");
    assert_eq!(info.num_ack_pending, 0);
    assert_eq!(info.num_pending, 0);
    world.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ack_wait_expiry_redelivers_and_the_consumer_replays() {
    redeliveries_replay(None, 2, Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn naks_redeliver_and_the_consumer_replays() {
    redeliveries_replay(Some(AckKind::Nak(None)), 3, Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_business_reference_reused_with_another_body_is_dead_lettered() {
    let Some(broker) = brokers::nats().await else {
        return;
    };
    let world = World::start(Store::Embedded).await;
    let setup = setup(&broker.url, Duration::from_secs(30)).await;
    // The producer re-publishes order 7 under new message ids (JetStream's
    // own duplicate window cannot see that): the order number is the
    // identity. The third carries another body for the same order.
    publish(&setup, "m-1", "order-7").await;
    publish(&setup, "m-2", "order-7").await;
    publish(&setup, "m-3", "order-7-changed").await;
    let by_order = Identity::Extract(Arc::new(|message: &Message| {
        let body = std::str::from_utf8(&message.body).map_err(|_| "not UTF-8".to_owned())?;
        let order = body.strip_prefix("order-").ok_or("no order number")?;
        Ok(order.split('-').next().unwrap_or(order).to_owned())
    }));
    let settings = ConsumerSettings::new("shipments.create").identity(by_order);
    let effects = Effects::default();
    let handler = effects.handler();
    let consumer = dedup(world.client().await, &setup, settings);
    let mut messages = setup.consumer.messages().await.expect("messages");
    let mut shown = Vec::new();
    for _ in 0..3 {
        let message = next(&mut messages).await;
        let verdict = consumer.handle(&message, &handler).await.expect("settled");
        shown.push(match verdict {
            Verdict::Ack(execution) => format!("ack {:?}", execution.source),
            Verdict::DeadLetter { reason, .. } => format!("dead-letter {reason}"),
            other => format!("{other:?}"),
        });
    }
    assert_eq!(
        shown,
        [
            "ack Executed",
            "ack Replayed",
            "dead-letter IDEMPOTENCY_KEY_REUSED"
        ]
    );
    assert_eq!(effects.of("order-7"), 1);
    assert_eq!(
        effects.of("order-7-changed"),
        0,
        "a conflict never executes"
    );
    let settled = setup
        .context
        .get_stream(&setup.settled_stream)
        .await
        .expect("settled stream");
    let dead = settled.get_raw_message(1).await.expect("the dead letter");
    assert_eq!(dead.subject.as_str(), setup.dead_letters);
    assert_eq!(&dead.payload[..], b"order-7-changed");
    let header = |name: &str| {
        dead.headers
            .get(name)
            .map(|value| value.as_str().to_owned())
    };
    assert_eq!(
        header(headers::REASON).as_deref(),
        Some("IDEMPOTENCY_KEY_REUSED")
    );
    assert_eq!(header("x-idemd-message-id").as_deref(), Some("m-3"));
    assert!(header(headers::OPERATION_ID).is_some());
    // Terminated, not redelivered: nothing pending.
    let mut consumer_info = setup.consumer.clone();
    let info = consumer_info.info().await.expect("consumer info");
    assert_eq!(info.num_ack_pending, 0);
    world.finish().await;
}
