//! RabbitMQ: a consumer whose channel dies before its acks, nacks with
//! requeue, a connection cut mid-flight; conflicts dead-lettered, unknown
//! outcomes parked.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use futures_util::StreamExt;
use idemd_client::consumer::rabbitmq::{Destination, RabbitConsumer};
use idemd_client::consumer::{ConsumerSettings, Reason, Verdict, headers};
use idemd_client::{Disposition, Source};
use lapin::message::Delivery;
use lapin::options::{
    BasicConsumeOptions, BasicGetOptions, BasicNackOptions, BasicPublishOptions, BasicQosOptions,
    QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::timeout;

use super::brokers;
use super::support::{Store, World};
use super::{Effects, unique};

const MESSAGES: usize = 5;

struct Queues {
    work: String,
    dead_letters: String,
    parking: String,
}

async fn connect(url: &str) -> (Connection, Channel) {
    let connection = Connection::connect(url, ConnectionProperties::default())
        .await
        .expect("amqp connect");
    let channel = connection.create_channel().await.expect("channel");
    (connection, channel)
}

async fn declare(channel: &Channel) -> Queues {
    let queues = Queues {
        work: unique("work"),
        dead_letters: unique("dead-letters"),
        parking: unique("parking"),
    };
    for name in [&queues.work, &queues.dead_letters, &queues.parking] {
        channel
            .queue_declare(
                name.as_str().into(),
                QueueDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("queue declare");
    }
    queues
}

async fn publish(channel: &Channel, queue: &str, message_id: &str, body: &str) {
    channel
        .basic_publish(
            "".into(),
            queue.into(),
            BasicPublishOptions::default(),
            body.as_bytes(),
            BasicProperties::default().with_message_id(message_id.into()),
        )
        .await
        .expect("publish")
        .await
        .expect("publish confirm");
}

async fn consumer(world: &World, channel: &Channel, queues: &Queues) -> RabbitConsumer {
    let mut settings = ConsumerSettings::new("shipments.create");
    settings.template.lease = Duration::from_secs(3);
    RabbitConsumer::new(
        world.client().await,
        channel.clone(),
        settings,
        Destination::queue(&queues.dead_letters),
        Destination::queue(&queues.parking),
    )
    .await
    .expect("consumer")
}

async fn deliveries(channel: &Channel, queue: &str) -> lapin::Consumer {
    channel
        .basic_qos(MESSAGES as u16, BasicQosOptions::default())
        .await
        .expect("qos");
    channel
        .basic_consume(
            queue.into(),
            unique("consumer").as_str().into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("consume")
}

async fn next(deliveries: &mut lapin::Consumer) -> Delivery {
    timeout(Duration::from_secs(20), deliveries.next())
        .await
        .expect("a delivery within 20 s")
        .expect("the stream goes on")
        .expect("a delivery")
}

fn message_id(delivery: &Delivery) -> String {
    delivery
        .properties
        .message_id()
        .as_ref()
        .map(|id| id.as_str().to_owned())
        .expect("a message id")
}

/// The work queue's MESSAGES messages: `m-N` carrying `order-N`.
async fn publish_orders(channel: &Channel, queue: &str) {
    for number in 0..MESSAGES {
        publish(
            channel,
            queue,
            &format!("m-{number}"),
            &format!("order-{number}"),
        )
        .await;
    }
}

/// A second consumer, on a connection of its own, takes every message the
/// first left unacked and must be told each one's stored answer (a replay,
/// acked), never run it again; how many came back flagged redelivered.
async fn a_new_consumer_replays_every_message<H, F>(
    world: &World,
    broker_url: &str,
    queues: &Queues,
    handler: &H,
) -> usize
where
    H: Fn(idemd_client::EffectContext, std::sync::Arc<idemd_client::consumer::Message>) -> F,
    F: Future<Output = Disposition>,
{
    let (connection, channel) = connect(broker_url).await;
    let second = consumer(world, &channel, queues).await;
    let mut deliveries = deliveries(&channel, &queues.work).await;
    let mut redelivered = 0;
    for _ in 0..MESSAGES {
        let delivery = next(&mut deliveries).await;
        redelivered += usize::from(delivery.redelivered);
        let verdict = second.handle(&delivery, handler).await.expect("settled");
        assert!(
            matches!(&verdict, Verdict::Ack(execution) if execution.source == Source::Replayed),
            "{verdict:?}"
        );
    }
    // Closed cleanly, so that every ack has reached the broker.
    connection
        .close(200, "done".into())
        .await
        .expect("close the second consumer's connection");
    redelivered
}

/// Decides every first delivery (the effect runs and is recorded), then
/// `lose` drops the consumer without a single ack; a second consumer gets
/// every message again, flagged redelivered, and replays it.
async fn effects_survive_losing_the_consumer_before_its_acks<L, LF>(lose: L) -> Option<()>
where
    L: FnOnce(Connection, Channel) -> LF,
    LF: Future<Output = ()>,
{
    let broker = brokers::rabbitmq().await?;
    let world = World::start(Store::Embedded).await;
    let (setup_connection, setup) = connect(&broker.url).await;
    let queues = declare(&setup).await;
    publish_orders(&setup, &queues.work).await;
    let effects = Effects::default();
    let handler = effects.handler();

    let (first_connection, first_channel) = connect(&broker.url).await;
    let first = consumer(&world, &first_channel, &queues).await;
    let mut first_deliveries = deliveries(&first_channel, &queues.work).await;
    for _ in 0..MESSAGES {
        let delivery = next(&mut first_deliveries).await;
        assert!(!delivery.redelivered);
        let verdict = first.decide(&delivery, &handler).await;
        assert!(
            matches!(&verdict, Verdict::Ack(execution) if execution.source == Source::Executed),
            "{verdict:?}"
        );
        // No settle: the consumer is lost before its ack.
    }
    assert_eq!(effects.total(), MESSAGES);
    lose(first_connection, first_channel).await;

    let redelivered =
        a_new_consumer_replays_every_message(&world, &broker.url, &queues, &handler).await;
    eprintln!(
        "rabbitmq: {redelivered} redeliveries seen, {} effects",
        effects.total()
    );
    assert_eq!(
        redelivered, MESSAGES,
        "every message came back flagged redelivered"
    );
    for number in 0..MESSAGES {
        assert_eq!(effects.of(&format!("order-{number}")), 1);
    }
    assert_eq!(queue_length(&setup, &queues.work).await, 0, "all acked");
    let _ = setup_connection.close(200, "done".into()).await;
    world.finish().await;
    Some(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_whose_channel_dies_before_its_acks_executes_each_message_once() {
    effects_survive_losing_the_consumer_before_its_acks(|connection, channel| async move {
        // The channel goes with its unacked messages, as when the process
        // holding it is killed: the broker requeues them.
        channel
            .close(200, "killed".into())
            .await
            .expect("close channel");
        drop(connection);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_before_the_acks_executes_each_message_once() {
    let Some(broker) = brokers::rabbitmq().await else {
        return;
    };
    let world = World::start(Store::Embedded).await;
    let (_setup_connection, setup) = connect(&broker.url).await;
    let queues = declare(&setup).await;
    publish_orders(&setup, &queues.work).await;
    let effects = Effects::default();
    let handler = effects.handler();

    // The first consumer reaches the broker through a proxy that is cut
    // after every message was decided: a dead TCP connection, no AMQP close.
    let cut = CutProxy::start(([127, 0, 0, 1], broker.port).into()).await;
    let (first_connection, first_channel) =
        connect(&format!("amqp://guest:guest@{}/%2f", cut.addr)).await;
    let first = consumer(&world, &first_channel, &queues).await;
    let mut first_deliveries = deliveries(&first_channel, &queues.work).await;
    for _ in 0..MESSAGES {
        let delivery = next(&mut first_deliveries).await;
        let verdict = first.decide(&delivery, &handler).await;
        assert!(matches!(verdict, Verdict::Ack(_)), "{verdict:?}");
    }
    cut.cut();
    // The consumer's stream ends with the connection: nothing more arrives.
    let after_cut = timeout(Duration::from_secs(10), first_deliveries.next()).await;
    assert!(
        !matches!(after_cut, Ok(Some(Ok(_)))),
        "no delivery on a cut connection: {after_cut:?}"
    );
    drop(first_connection);

    let redelivered =
        a_new_consumer_replays_every_message(&world, &broker.url, &queues, &handler).await;
    eprintln!(
        "rabbitmq (cut): {redelivered} redeliveries seen, {} effects",
        effects.total()
    );
    assert_eq!(redelivered, MESSAGES);
    assert_eq!(effects.total(), MESSAGES);
    for number in 0..MESSAGES {
        assert_eq!(effects.of(&format!("order-{number}")), 1);
    }
    assert_eq!(queue_length(&setup, &queues.work).await, 0, "all acked");
    world.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacks_with_requeue_redeliver_and_replay_never_reexecute() {
    let Some(broker) = brokers::rabbitmq().await else {
        return;
    };
    const NACKS: usize = 3;
    let world = World::start(Store::Embedded).await;
    let (_connection, channel) = connect(&broker.url).await;
    let queues = declare(&channel).await;
    publish_orders(&channel, &queues.work).await;
    let effects = Effects::default();
    let handler = effects.handler();
    let consumer = consumer(&world, &channel, &queues).await;
    let mut deliveries = deliveries(&channel, &queues.work).await;
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut redelivered = 0;
    let mut acked = 0;
    while acked < MESSAGES {
        let delivery = next(&mut deliveries).await;
        redelivered += usize::from(delivery.redelivered);
        let deliveries_of_this = {
            let count = seen.entry(message_id(&delivery)).or_default();
            *count += 1;
            *count
        };
        let verdict = consumer.decide(&delivery, &handler).await;
        let Verdict::Ack(execution) = &verdict else {
            panic!("{verdict:?}");
        };
        let expected = if deliveries_of_this == 1 {
            Source::Executed
        } else {
            Source::Replayed
        };
        assert_eq!(execution.source, expected);
        if deliveries_of_this <= NACKS {
            // The effect was recorded; the broker is told to try again.
            delivery
                .nack(BasicNackOptions {
                    multiple: false,
                    requeue: true,
                })
                .await
                .expect("nack");
        } else {
            consumer.settle(&delivery, &verdict).await.expect("ack");
            acked += 1;
        }
    }
    eprintln!(
        "rabbitmq (nack): {redelivered} redeliveries seen, {} effects",
        effects.total()
    );
    assert_eq!(
        redelivered,
        MESSAGES * NACKS,
        "every nack came back flagged redelivered"
    );
    assert!(seen.values().all(|count| *count == NACKS + 1), "{seen:?}");
    assert_eq!(effects.total(), MESSAGES);
    for number in 0..MESSAGES {
        assert_eq!(effects.of(&format!("order-{number}")), 1);
    }
    assert_eq!(queue_length(&channel, &queues.work).await, 0, "all acked");
    world.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_is_dead_lettered_and_an_unknown_outcome_parked_never_executed() {
    let Some(broker) = brokers::rabbitmq().await else {
        return;
    };
    let world = World::start(Store::Embedded).await;
    let (_connection, channel) = connect(&broker.url).await;
    let queues = declare(&channel).await;
    // m-1 three times: the intent, a redelivered duplicate, and another
    // body under the same id. m-2's handler cannot tell whether its effect
    // happened; m-2 comes twice.
    publish(&channel, &queues.work, "m-1", "order-1").await;
    publish(&channel, &queues.work, "m-1", "order-1").await;
    publish(&channel, &queues.work, "m-1", "order-1-changed").await;
    publish(&channel, &queues.work, "m-2", "order-2").await;
    publish(&channel, &queues.work, "m-2", "order-2").await;

    let effects = Effects::default();
    let succeed = effects.handler();
    let handler = move |context, message: std::sync::Arc<idemd_client::consumer::Message>| {
        let disposition = succeed(context, message.clone());
        async move {
            if message.body == b"order-2" {
                // Counted as attempted; its outcome is unknown.
                disposition.await;
                Disposition::Unknown(Default::default())
            } else {
                disposition.await
            }
        }
    };
    let mut settings = ConsumerSettings::new("shipments.create");
    settings.template.max_attempts = Some(1);
    let consumer = RabbitConsumer::new(
        world.client().await,
        channel.clone(),
        settings,
        Destination::queue(&queues.dead_letters),
        Destination::queue(&queues.parking),
    )
    .await
    .expect("consumer");
    let mut deliveries = deliveries(&channel, &queues.work).await;
    let mut verdicts = Vec::new();
    for _ in 0..5 {
        let delivery = next(&mut deliveries).await;
        verdicts.push(consumer.handle(&delivery, &handler).await.expect("settled"));
    }
    let shown: Vec<String> = verdicts
        .iter()
        .map(|verdict| match verdict {
            Verdict::Ack(execution) => format!("ack {:?}", execution.source),
            Verdict::DeadLetter { reason, .. } => format!("dead-letter {reason}"),
            Verdict::Park { reason, .. } => format!("park {reason}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        shown,
        [
            "ack Executed",
            "ack Replayed",
            "dead-letter IDEMPOTENCY_KEY_REUSED",
            "park OUTCOME_UNKNOWN",
            "park NEEDS_RECONCILIATION",
        ]
    );
    assert_eq!(effects.of("order-1"), 1);
    assert_eq!(
        effects.of("order-1-changed"),
        0,
        "a conflict never executes"
    );
    assert_eq!(
        effects.of("order-2"),
        1,
        "a parked operation never runs again"
    );

    let dead = get(&channel, &queues.dead_letters).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].0, "order-1-changed");
    assert_eq!(
        dead[0].1.get(headers::REASON).map(String::as_str),
        Some(Reason::KeyReused.as_str())
    );
    assert_eq!(
        dead[0].1.get(headers::VERDICT).map(String::as_str),
        Some("dead-letter")
    );
    assert!(dead[0].1.contains_key(headers::OPERATION_ID));
    let parked = get(&channel, &queues.parking).await;
    let reasons: Vec<&str> = parked
        .iter()
        .map(|(_, headers)| headers.get(headers::REASON).map_or("", String::as_str))
        .collect();
    assert_eq!(reasons, ["OUTCOME_UNKNOWN", "NEEDS_RECONCILIATION"]);
    assert_eq!(queue_length(&channel, &queues.work).await, 0, "all settled");
    world.finish().await;
}

/// Every message in `queue` (taken), with its string headers.
async fn get(channel: &Channel, queue: &str) -> Vec<(String, HashMap<String, String>)> {
    let mut messages = Vec::new();
    while let Some(message) = channel
        .basic_get(queue.into(), BasicGetOptions { no_ack: true })
        .await
        .expect("basic.get")
    {
        let mut found = HashMap::new();
        if let Some(table) = message.delivery.properties.headers() {
            for (name, value) in table.inner() {
                if let AMQPValue::LongString(value) = value {
                    found.insert(
                        name.as_str().to_owned(),
                        String::from_utf8_lossy(value.as_bytes()).into_owned(),
                    );
                }
            }
        }
        messages.push((
            String::from_utf8_lossy(&message.delivery.data).into_owned(),
            found,
        ));
    }
    messages
}

async fn queue_length(channel: &Channel, queue: &str) -> u32 {
    channel
        .queue_declare(
            queue.into(),
            QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .expect("passive declare")
        .message_count()
}

/// A TCP proxy whose every connection can be cut at once.
struct CutProxy {
    addr: SocketAddr,
    cut: watch::Sender<bool>,
}

impl CutProxy {
    async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (cut, _) = watch::channel(false);
        let cuts = cut.clone();
        tokio::spawn(async move {
            while let Ok((mut downstream, _)) = listener.accept().await {
                let mut cut = cuts.subscribe();
                tokio::spawn(async move {
                    let Ok(mut upstream) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut downstream, &mut upstream) => {}
                        _ = cut.wait_for(|cut| *cut) => {}
                    }
                });
            }
        });
        Self { addr, cut }
    }

    fn cut(&self) {
        self.cut.send_replace(true);
    }
}
