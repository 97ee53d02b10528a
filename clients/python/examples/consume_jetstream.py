"""A deduplicating JetStream consumer: ships each order at most once, however often
JetStream delivers it, and dead-letters an order re-sent with another body.

    cargo run --release -- serve --dev                      # in another terminal
    nats-server -js -p 4222                                 # and another
    IDEMD_ADDR=127.0.0.1:50051 IDEMD_TOKEN=$(cat idemd-data/dev-token) \\
        python clients/python/examples/consume_jetstream.py --nats nats://127.0.0.1:4222

It makes the streams ORDERS (``orders.new``) and ORDERS_SETTLED (``orders.dead``,
``orders.parked``), publishes order 1 twice under two message ids (a producer that
re-sent it) and once more with another amount, and consumes them; the order number in
the body, not the message id, is the identity.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import uuid

import nats
from nats.js.api import AckPolicy, ConsumerConfig

import idemd
from idemd import EffectContext, Success
from idemd.consumer import ConsumerSettings, Message
from idemd.jetstream import JetStreamConsumer


def order_number(message: Message) -> str:
    return str(json.loads(message.body)["order"])


async def main(addr: str, token: str, nats_url: str, run: str) -> list[str]:
    shipped: list[str] = []

    async def ship(context: EffectContext, message: Message) -> Success:
        # The effect: pass context.operation_id to the carrier as its idempotency key.
        shipped.append(order_number(message))
        return Success(b'{"parcel":"P-1"}', content_type="application/json")

    lines = []
    connection = await nats.connect(nats_url)
    js = connection.jetstream()
    await js.add_stream(name=f"ORDERS_{run}", subjects=[f"{run}.orders.new"])
    await js.add_stream(name=f"ORDERS_SETTLED_{run}",
                        subjects=[f"{run}.orders.dead", f"{run}.orders.parked"])
    for message_id, order in [("a", {"order": 1, "amount": 10}), ("b", {"order": 1, "amount": 10}),
                              ("c", {"order": 1, "amount": 99})]:
        await js.publish(f"{run}.orders.new", json.dumps(order).encode(),
                         headers={"Nats-Msg-Id": f"{run}-{message_id}"})
    subscription = await js.pull_subscribe(
        f"{run}.orders.new", durable="shipper",
        config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, ack_wait=30))
    async with idemd.Client(addr, token) as client:
        settings = ConsumerSettings("orders.ship", identity=order_number, json_body=True)
        consumer = JetStreamConsumer(client, js, settings,
                                     dead_letter_subject=f"{run}.orders.dead",
                                     parking_subject=f"{run}.orders.parked")
        for _ in range(3):
            for delivered in await subscription.fetch(1, timeout=10):
                verdict = await consumer.handle(delivered, ship)
                lines.append(f"{verdict.kind}: {verdict.reason or ('replayed' if verdict.replayed else 'shipped')}")
    await connection.close()
    lines.append(f"shipped: {shipped}")
    return lines


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--addr", default=os.environ.get("IDEMD_ADDR", "127.0.0.1:50051"))
    parser.add_argument("--token", default=os.environ.get("IDEMD_TOKEN", ""))
    parser.add_argument("--nats", default=os.environ.get("NATS_URL", "nats://127.0.0.1:4222"))
    parser.add_argument("--run", default=uuid.uuid4().hex[:8], help="names this run's streams")
    args = parser.parse_args()
    for line in asyncio.run(main(args.addr, args.token, args.nats, args.run)):
        print(line)
