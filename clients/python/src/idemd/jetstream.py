"""The NATS JetStream adapter of :mod:`idemd.consumer`, over nats-py (``pip install
idemd[jetstream]``): a message becomes a :class:`~idemd.consumer.Message`, a verdict
becomes the consumer's acknowledgement.

* ack: ``+ACK`` (confirmed by the server), after the outcome is recorded (or replayed);
* dead_letter / park: published to the dead-letter or parking subject with the
  ``x-idemd-*`` headers (the stream's ack awaited), then ``+TERM``;
* retry_later: ``-NAK`` with the delay named (at most :data:`LONGEST_DELAY`).

``+TERM`` stops redelivery without calling the message done. The copy keeps the
original subject and message id in ``x-idemd-subject`` and ``x-idemd-message-id``, not
in ``Nats-Msg-Id``, so the dead-letter stream never drops one as a duplicate. The
subjects must be captured by a stream, or the publish fails and the message stays
unacknowledged (redelivered after ack-wait).
"""

from __future__ import annotations

from typing import Any

from nats.aio.msg import Msg
from nats.js import JetStreamContext

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

__all__ = ["LONGEST_DELAY", "JetStreamConsumer", "message_of"]

#: The longest redelivery delay asked for (retry_later), in seconds.
LONGEST_DELAY = 60.0
HEADER_SUBJECT = "x-idemd-subject"
HEADER_MESSAGE_ID = "x-idemd-message-id"
_NATS_MSG_ID = "Nats-Msg-Id"


def message_of(delivered: Msg) -> Message:
    """The message JetStream delivered."""
    count = delivered.metadata.num_delivered
    return Message(
        message_id=(delivered.headers or {}).get(_NATS_MSG_ID),
        body=delivered.data,
        delivery_count=count,
        redelivered=bool(count and count > 1),
    )


class JetStreamConsumer:
    """A deduplicating consumer that copies dead letters and parked messages through
    ``js`` to the two subjects."""

    def __init__(self, client: Any, js: JetStreamContext, settings: ConsumerSettings,
                 *, dead_letter_subject: str, parking_subject: str) -> None:
        self.client = client
        self.js = js
        self.settings = settings
        self.dead_letter_subject = dead_letter_subject
        self.parking_subject = parking_subject

    async def handle(self, delivered: Msg, handler: Handler) -> Verdict:
        verdict = await self.decide(delivered, handler)
        await self.settle(delivered, verdict)
        return verdict

    async def decide(self, delivered: Msg, handler: Handler) -> Verdict:
        """Runs the message through idemd (the handler at most once) and says what to
        tell JetStream, without telling it."""
        return await consume(self.client, self.settings, message_of(delivered), handler)

    async def settle(self, delivered: Msg, verdict: Verdict) -> None:
        if verdict.kind == "ack":
            # Confirmed by the server: a verdict is not reported settled while its ack
            # is lost on the way.
            await delivered.ack_sync()
        elif verdict.kind in ("dead_letter", "park"):
            subject = (self.dead_letter_subject if verdict.kind == "dead_letter"
                       else self.parking_subject)
            await self._copy(delivered, subject, verdict)
            await delivered.term()
        else:
            await delivered.nak(delay=min(verdict.after, LONGEST_DELAY))

    async def _copy(self, delivered: Msg, subject: str, verdict: Verdict) -> None:
        original = dict(delivered.headers or {})
        headers = {name: value for name, value in original.items() if name != _NATS_MSG_ID}
        if _NATS_MSG_ID in original:
            headers[HEADER_MESSAGE_ID] = original[_NATS_MSG_ID]
        headers[HEADER_SUBJECT] = delivered.subject
        headers[HEADER_VERDICT] = "dead-letter" if verdict.kind == "dead_letter" else "park"
        headers[HEADER_REASON] = verdict.reason or ""
        if verdict.operation_id:
            headers[HEADER_OPERATION_ID] = verdict.operation_id
        headers[HEADER_DETAIL] = verdict.detail
        await self.js.publish(subject, delivered.data, headers=headers)
