"""Deduplicating consumers against real brokers (tests/brokers.py starts them) and a
real idemd. Every broker test makes the broker redeliver, counts the redeliveries it
saw (RabbitMQ's redelivered flag, JetStream's num_delivered) and counts effects at the
handler: exactly one per message however many deliveries."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any

import grpc
import pytest

import idemd
from idemd import errors
from idemd.consumer import (
    HEADER_OPERATION_ID,
    HEADER_REASON,
    ConsumerSettings,
    Message,
    NoIdentity,
    Verdict,
    operation_key,
    verdict_for,
)
from idemd.execute import EffectContext, Result, Success, Unknown

MESSAGES = 5
FAILED_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION


@pytest.fixture
def store() -> str:
    # The consumers are a client concern: one store is enough here (execute-once has
    # both stores' tests).
    return "sqlite"


class Effects:
    """One effect per handler call, counted by the message body."""

    def __init__(self) -> None:
        self.counts: Counter[bytes] = Counter()

    async def handler(self, context: EffectContext, message: Message) -> Success:
        self.counts[message.body] += 1
        return Success(b'{"shipped":true}', content_type="application/json")


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---- the decision core, no broker ---------------------------------------------------


def test_the_message_id_is_the_key_unless_an_identity_function_is_given() -> None:
    by_id = ConsumerSettings("shipments.create")
    assert operation_key(by_id, Message("m-1", b"{}")) == "m-1"
    for missing in (None, ""):
        verdict = operation_key(by_id, Message(missing, b"{}"))
        assert isinstance(verdict, Verdict)
        assert (verdict.kind, verdict.reason) == ("dead_letter", "NO_MESSAGE_IDENTITY")

    def order(message: Message) -> str:
        if not message.body.startswith(b"order-"):
            raise NoIdentity("no order number")
        return message.body.decode().split("-")[1]

    by_order = ConsumerSettings("shipments.create", identity=order)
    assert operation_key(by_order, Message(None, b"order-7")) == "7"
    verdict = operation_key(by_order, Message("m-1", b"other"))
    assert verdict == Verdict("dead_letter", "NO_MESSAGE_IDENTITY", None, "no order number")


def test_every_outcome_of_execute_once_has_one_verdict() -> None:
    result = Result("op", b"", "", {}, 1, replayed=True)
    table: list[tuple[Any, tuple[str, str | None]]] = [
        (result, ("ack", None)),
        (errors.ConflictError(FAILED_PRECONDITION, "x", reason="IDEMPOTENCY_KEY_REUSED"),
         ("dead_letter", "IDEMPOTENCY_KEY_REUSED")),
        (errors.ResultExpiredError(FAILED_PRECONDITION, "x", reason="RESULT_EXPIRED"),
         ("dead_letter", "RESULT_EXPIRED")),
        (errors.InvalidArgumentError(grpc.StatusCode.INVALID_ARGUMENT, "x"),
         ("dead_letter", "INVALID_MESSAGE")),
        (errors.NeedsReconciliationError("op", 3, 3), ("park", "NEEDS_RECONCILIATION")),
        (errors.OutcomeUnknownError("op", "x"), ("park", "OUTCOME_UNKNOWN")),
        (errors.AttemptTimeoutError("op", "x"), ("park", "OUTCOME_UNKNOWN")),
        (errors.PendingError("op", 0.7, "IN_PROGRESS"), ("retry_later", None)),
        (errors.UnavailableError(grpc.StatusCode.UNAVAILABLE, "x"), ("retry_later", None)),
        (errors.SupersededError(None), ("retry_later", None)),
        (ConnectionError("reset"), ("retry_later", None)),
    ]
    for outcome, expected in table:
        verdict = verdict_for(outcome)
        assert (verdict.kind, verdict.reason) == expected, outcome
    assert verdict_for(errors.PendingError("op", 0.7, "IN_PROGRESS")).after == 0.7
    assert verdict_for(ConnectionError(), retry_delay=2.0).after == 2.0


# ---- RabbitMQ -----------------------------------------------------------------------


async def _rabbit(url: str) -> tuple[Any, Any, dict[str, str]]:
    import aio_pika

    connection = await aio_pika.connect(url)
    channel = await connection.channel()
    queues = {"work": name("work"), "dead": name("dead"), "parked": name("parked")}
    for queue in queues.values():
        await channel.declare_queue(queue)
    return connection, channel, queues


async def _publish(channel: Any, queue: str, message_id: str, body: bytes) -> None:
    import aio_pika

    await channel.default_exchange.publish(
        aio_pika.Message(body, message_id=message_id), routing_key=queue)


async def _queue_length(channel: Any, queue: str) -> int:
    declared = await channel.declare_queue(queue, passive=True)
    return int(declared.declaration_result.message_count)


async def test_rabbitmq_a_channel_lost_before_its_acks_and_nacks_with_requeue_execute_once(
    rabbitmq_url: str, client: idemd.Client,
) -> None:
    from idemd.rabbitmq import RabbitConsumer

    connection, channel, queues = await _rabbit(rabbitmq_url)
    for number in range(MESSAGES):
        await _publish(channel, queues["work"], f"m-{number}", f"order-{number}".encode())
    effects = Effects()
    settings = ConsumerSettings("shipments.create", execute={"lease": 3.0})

    # The first consumer decides every message (the effect runs and is recorded) and
    # loses its channel before a single ack: the broker requeues them all.
    first_channel = await connection.channel()
    await first_channel.set_qos(prefetch_count=MESSAGES)
    first = RabbitConsumer(client, first_channel, settings,
                           dead_letters=queues["dead"], parking=queues["parked"])
    first_queue = await first_channel.get_queue(queues["work"])
    async with first_queue.iterator() as deliveries:
        decided = 0
        async for incoming in deliveries:
            assert not incoming.redelivered
            verdict = await first.decide(incoming, effects.handler)
            assert verdict.kind == "ack" and not verdict.replayed
            decided += 1
            if decided == MESSAGES:
                break
    await first_channel.close()

    # The second nacks (requeue) each message twice after deciding it, then acks.
    second_channel = await connection.channel()
    await second_channel.set_qos(prefetch_count=MESSAGES)
    second = RabbitConsumer(client, second_channel, settings,
                            dead_letters=queues["dead"], parking=queues["parked"])
    second_queue = await second_channel.get_queue(queues["work"])
    seen: Counter[str] = Counter()
    redelivered = acked = 0
    async with second_queue.iterator() as deliveries:
        async for incoming in deliveries:
            redelivered += bool(incoming.redelivered)
            seen[incoming.message_id] += 1
            verdict = await second.decide(incoming, effects.handler)
            assert verdict.kind == "ack" and verdict.replayed, verdict
            if seen[incoming.message_id] <= 2:
                await incoming.nack(requeue=True)
            else:
                await second.settle(incoming, verdict)
                acked += 1
                if acked == MESSAGES:
                    break
    print(f"rabbitmq (python): {redelivered} redeliveries seen, {sum(effects.counts.values())} effects")
    assert redelivered == MESSAGES * 3
    assert all(count == 3 for count in seen.values()), seen
    assert effects.counts == Counter({f"order-{n}".encode(): 1 for n in range(MESSAGES)})
    assert await _queue_length(channel, queues["work"]) == 0
    await connection.close()


async def test_rabbitmq_a_conflict_is_dead_lettered_and_an_unknown_outcome_parked(
    rabbitmq_url: str, client: idemd.Client,
) -> None:
    from idemd.rabbitmq import RabbitConsumer

    connection, channel, queues = await _rabbit(rabbitmq_url)
    for message_id, body in [("m-1", b"order-1"), ("m-1", b"order-1"),
                             ("m-1", b"order-1-changed"), ("m-2", b"order-2"),
                             ("m-2", b"order-2")]:
        await _publish(channel, queues["work"], message_id, body)
    effects = Effects()

    async def handler(context: EffectContext, message: Message) -> Success | Unknown:
        done = await effects.handler(context, message)
        return Unknown("timeout", "no answer") if message.body == b"order-2" else done

    settings = ConsumerSettings("shipments.create", execute={"max_attempts": 1})
    consumer = RabbitConsumer(client, channel, settings,
                              dead_letters=queues["dead"], parking=queues["parked"])
    queue = await channel.get_queue(queues["work"])
    shown = []
    async with queue.iterator() as deliveries:
        async for incoming in deliveries:
            verdict = await consumer.handle(incoming, handler)
            shown.append(f"{verdict.kind} {verdict.reason or verdict.replayed}")
            if len(shown) == 5:
                break
    assert shown == ["ack False", "ack True", "dead_letter IDEMPOTENCY_KEY_REUSED",
                     "park OUTCOME_UNKNOWN", "park NEEDS_RECONCILIATION"]
    assert effects.counts == Counter({b"order-1": 1, b"order-2": 1})
    dead = await (await channel.get_queue(queues["dead"])).get(no_ack=True)
    assert dead.body == b"order-1-changed"
    assert dead.headers[HEADER_REASON] == "IDEMPOTENCY_KEY_REUSED"
    assert dead.headers[HEADER_OPERATION_ID]
    parked = await channel.get_queue(queues["parked"])
    reasons = [(await parked.get(no_ack=True)).headers[HEADER_REASON] for _ in range(2)]
    assert reasons == ["OUTCOME_UNKNOWN", "NEEDS_RECONCILIATION"]
    assert await _queue_length(channel, queues["work"]) == 0
    await connection.close()


class CutProxy:
    """A TCP proxy whose every connection can be cut at once (no AMQP close)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.writers: list[asyncio.StreamWriter] = []

    async def start(self) -> CutProxy:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self.writers += [writer, up_writer]

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def cut(self) -> None:
        for writer in self.writers:
            writer.transport.abort()
        self.server.close()


async def test_rabbitmq_a_connection_cut_before_the_acks_executes_each_message_once(
    rabbitmq_url: str, client: idemd.Client,
) -> None:
    from urllib.parse import urlsplit

    import aio_pika

    from idemd.rabbitmq import RabbitConsumer

    connection, channel, queues = await _rabbit(rabbitmq_url)
    for number in range(MESSAGES):
        await _publish(channel, queues["work"], f"m-{number}", f"order-{number}".encode())
    effects = Effects()
    settings = ConsumerSettings("shipments.create", execute={"lease": 3.0})
    port = urlsplit(rabbitmq_url).port
    assert port is not None
    proxy = await CutProxy(port).start()
    cut_connection = await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:{proxy.port}/")
    cut_channel = await cut_connection.channel()
    await cut_channel.set_qos(prefetch_count=MESSAGES)
    first = RabbitConsumer(client, cut_channel, settings,
                           dead_letters=queues["dead"], parking=queues["parked"])
    queue = await cut_channel.get_queue(queues["work"])
    decided = []
    async with queue.iterator() as deliveries:
        async for incoming in deliveries:
            decided.append(await first.decide(incoming, effects.handler))
            if len(decided) == MESSAGES:
                break
    # The connection dies under the consumer before a single ack (the messages stay
    # unacked on its channel until the broker sees it gone).
    proxy.cut()
    assert [verdict.kind for verdict in decided] == ["ack"] * MESSAGES
    assert sum(effects.counts.values()) == MESSAGES

    second = RabbitConsumer(client, channel, settings,
                            dead_letters=queues["dead"], parking=queues["parked"])
    redelivered = 0
    async with (await channel.get_queue(queues["work"])).iterator() as deliveries:
        async for incoming in deliveries:
            redelivered += bool(incoming.redelivered)
            verdict = await second.handle(incoming, effects.handler)
            assert verdict.kind == "ack" and verdict.replayed, verdict
            if redelivered == MESSAGES:
                break
    print(f"rabbitmq (python, cut): {redelivered} redeliveries seen, "
          f"{sum(effects.counts.values())} effects")
    assert effects.counts == Counter({f"order-{n}".encode(): 1 for n in range(MESSAGES)})
    assert await _queue_length(channel, queues["work"]) == 0
    await connection.close()


# ---- NATS JetStream -----------------------------------------------------------------


async def _jetstream(url: str, ack_wait: float) -> tuple[Any, Any, dict[str, str], Any]:
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig

    nc = await nats.connect(url)
    js = nc.jetstream()
    work, settled = name("work"), name("settled")
    subjects = {"work": f"{work}.orders", "dead": f"{settled}.dead", "parked": f"{settled}.parked",
                "settled": settled}
    await js.add_stream(name=work, subjects=[subjects["work"]])
    await js.add_stream(name=settled, subjects=[subjects["dead"], subjects["parked"]])
    subscription = await js.pull_subscribe(
        subjects["work"], durable=name("shipper"),
        config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, ack_wait=ack_wait))
    return nc, js, subjects, subscription


@pytest.mark.parametrize("answer", ["ack-wait", "nak"])
async def test_jetstream_redeliveries_replay_never_reexecute(
    nats_url: str, client: idemd.Client, answer: str,
) -> None:
    from idemd.jetstream import JetStreamConsumer

    times = 2
    nc, js, subjects, subscription = await _jetstream(nats_url, 1.0 if answer == "ack-wait" else 30.0)
    for number in range(3):
        await js.publish(subjects["work"], f"order-{number}".encode(),
                         headers={"Nats-Msg-Id": f"m-{number}"})
    effects = Effects()
    consumer = JetStreamConsumer(client, js, ConsumerSettings("shipments.create"),
                                 dead_letter_subject=subjects["dead"],
                                 parking_subject=subjects["parked"])
    redeliveries = acked = 0
    while acked < 3:
        for delivered in await subscription.fetch(1, timeout=20):
            count = delivered.metadata.num_delivered
            redeliveries += count > 1
            verdict = await consumer.decide(delivered, effects.handler)
            assert verdict.kind == "ack" and verdict.replayed == (count > 1), verdict
            if count <= times:
                if answer == "nak":
                    await delivered.nak()
                # ack-wait: no answer at all; JetStream redelivers once it expires.
            else:
                await consumer.settle(delivered, verdict)
                acked += 1
    print(f"jetstream (python, {answer}): {redeliveries} redeliveries seen, "
          f"{sum(effects.counts.values())} effects")
    assert redeliveries == 3 * times
    assert effects.counts == Counter({f"order-{n}".encode(): 1 for n in range(3)})
    info = await subscription.consumer_info()
    assert info.num_ack_pending == 0 and info.num_pending == 0
    await nc.close()


async def test_jetstream_a_business_reference_reused_with_another_body_is_dead_lettered(
    nats_url: str, client: idemd.Client,
) -> None:
    from idemd.jetstream import JetStreamConsumer

    nc, js, subjects, subscription = await _jetstream(nats_url, 30.0)
    # Order 7 re-published under new message ids (JetStream's duplicate window cannot
    # see that): the order number is the identity; the third changes the body.
    for message_id, body in [("m-1", b"order-7"), ("m-2", b"order-7"), ("m-3", b"order-7-changed")]:
        await js.publish(subjects["work"], body, headers={"Nats-Msg-Id": message_id})

    def order(message: Message) -> str:
        return message.body.decode().split("-")[1]

    effects = Effects()
    consumer = JetStreamConsumer(client, js, ConsumerSettings("shipments.create", identity=order),
                                 dead_letter_subject=subjects["dead"],
                                 parking_subject=subjects["parked"])
    shown = []
    while len(shown) < 3:
        for delivered in await subscription.fetch(1, timeout=20):
            verdict = await consumer.handle(delivered, effects.handler)
            shown.append(f"{verdict.kind} {verdict.reason or verdict.replayed}")
    assert shown == ["ack False", "ack True", "dead_letter IDEMPOTENCY_KEY_REUSED"]
    assert effects.counts == Counter({b"order-7": 1})
    dead = await js.get_msg(subjects["settled"], 1)
    assert dead.data == b"order-7-changed"
    assert dead.headers[HEADER_REASON] == "IDEMPOTENCY_KEY_REUSED"
    assert dead.headers["x-idemd-message-id"] == "m-3"
    await asyncio.sleep(0)
    info = await subscription.consumer_info()
    assert info.num_ack_pending == 0
    await nc.close()


async def test_the_jetstream_example_ships_once_and_dead_letters_the_changed_order(
    nats_url: str, server: Any,
) -> None:
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "examples" / "consume_jetstream.py"
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(example), "--addr", server.addr, "--token", server.token,
         "--nats", nats_url],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "ack: shipped", "ack: replayed", "dead_letter: IDEMPOTENCY_KEY_REUSED", "shipped: ['1']"]
