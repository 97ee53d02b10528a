"""The RabbitMQ adapter of :mod:`idemd.consumer`, over aio-pika (``pip install
idemd[rabbitmq]``): a delivery becomes a :class:`~idemd.consumer.Message`, a verdict
becomes the broker's answer.

* ack: ``basic.ack``, after the outcome is recorded (or replayed);
* dead_letter / park: the message is republished (publisher-confirmed, mandatory) to
  the dead-letter or parking queue with the ``x-idemd-*`` headers, then acked;
* retry_later: held for ``after`` seconds (at most :data:`LONGEST_HOLD`), then
  ``basic.nack`` with requeue.

Republishing, not a reject to the queue's dead-letter exchange, is how the reason
travels with the message (RabbitMQ's ``x-death`` says only "rejected"). A consumer
that dies between the copy and the ack copies it again on the redelivery: dead
letters are at-least-once, the handler still at most once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage, AbstractQueue

from idemd.consumer import (
    HEADER_DETAIL,
    HEADER_OPERATION_ID,
    HEADER_REASON,
    HEADER_VERDICT,
    ConsumerSettings,
    Handler,
    Message,
    Verdict,
    consume,
)

__all__ = ["LONGEST_HOLD", "RabbitConsumer", "message_of"]

#: The longest a message is held before it is handed back (retry_later), in seconds.
LONGEST_HOLD = 30.0


def message_of(incoming: AbstractIncomingMessage) -> Message:
    """The message a delivery carries."""
    count = (incoming.headers or {}).get("x-delivery-count")  # quorum queues count returns
    return Message(
        message_id=incoming.message_id,
        body=incoming.body,
        delivery_count=count + 1 if isinstance(count, int) else None,
        redelivered=bool(incoming.redelivered),
    )


class RabbitConsumer:
    """A deduplicating consumer. ``channel`` must have publisher confirms on (aio-pika's
    default): a message is acked only once its dead-letter or parking copy is stored.
    ``dead_letters`` and ``parking`` are queue names (through the default exchange)."""

    def __init__(self, client: Any, channel: AbstractChannel, settings: ConsumerSettings,
                 *, dead_letters: str, parking: str) -> None:
        self.client = client
        self.channel = channel
        self.settings = settings
        self.dead_letters = dead_letters
        self.parking = parking

    async def run(self, queue: AbstractQueue, handler: Handler) -> None:
        """Consumes ``queue`` one message at a time until cancelled."""
        async with queue.iterator() as deliveries:
            async for incoming in deliveries:
                await self.handle(incoming, handler)

    async def handle(self, incoming: AbstractIncomingMessage, handler: Handler) -> Verdict:
        verdict = await self.decide(incoming, handler)
        await self.settle(incoming, verdict)
        return verdict

    async def decide(self, incoming: AbstractIncomingMessage, handler: Handler) -> Verdict:
        """Runs the delivery through idemd (the handler at most once) and says what to
        tell the broker, without telling it."""
        return await consume(self.client, self.settings, message_of(incoming), handler)

    async def settle(self, incoming: AbstractIncomingMessage, verdict: Verdict) -> None:
        if verdict.kind == "ack":
            await incoming.ack()
        elif verdict.kind in ("dead_letter", "park"):
            queue = self.dead_letters if verdict.kind == "dead_letter" else self.parking
            await self._copy(incoming, queue, verdict)
            await incoming.ack()
        else:
            # Requeued at once, a message idemd cannot take yet would come straight back.
            await asyncio.sleep(min(verdict.after, LONGEST_HOLD))
            await incoming.nack(requeue=True)

    async def _copy(self, incoming: AbstractIncomingMessage, queue: str, verdict: Verdict) -> None:
        headers = dict(incoming.headers or {})
        headers[HEADER_VERDICT] = "dead-letter" if verdict.kind == "dead_letter" else "park"
        headers[HEADER_REASON] = verdict.reason or ""
        if verdict.operation_id:
            headers[HEADER_OPERATION_ID] = verdict.operation_id
        headers[HEADER_DETAIL] = verdict.detail
        copy = aio_pika.Message(
            incoming.body,
            headers=headers,
            message_id=incoming.message_id,
            content_type=incoming.content_type,
            correlation_id=incoming.correlation_id,
            delivery_mode=incoming.delivery_mode,
        )
        # Mandatory: a queue that does not exist returns the copy instead of dropping
        # it, and aio-pika raises; the original stays unacked and comes back.
        await self.channel.default_exchange.publish(copy, routing_key=queue, mandatory=True)
