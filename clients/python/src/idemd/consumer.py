"""Deduplicating queue consumers: claim a message by its identity, run its handler
through :func:`~idemd.execute.execute_once`, and only then acknowledge it.

A message's identity is the producer's message id, or a business reference a
function of the caller's takes from it; its body is the payload (the same identity
with another body is a conflict). The decisions are broker-neutral and perform no
I/O (:func:`operation_key`, :func:`verdict_for`); :func:`consume` runs one message
through idemd and returns its :class:`Verdict`. The broker adapters
(:mod:`idemd.rabbitmq` over aio-pika, :mod:`idemd.jetstream` over nats-py) only turn
a delivery into a :class:`Message` and a verdict into the broker's answer:

============  ===========================================================
verdict       meaning
============  ===========================================================
ack           the operation has its outcome (new, replayed, or a stored
              terminal failure): acknowledge
dead_letter   never executable (IDEMPOTENCY_KEY_REUSED, RESULT_EXPIRED,
              NO_MESSAGE_IDENTITY, INVALID_MESSAGE): copy it, with the
              reason, to the dead letters; never redeliver
park          needs a reconciler (NEEDS_RECONCILIATION, OUTCOME_UNKNOWN):
              copy it, with the reason, to the parking place; not done
retry_later   idemd cannot decide now (unreachable, another attempt holds
              the operation): hand it back after ``after`` seconds
============  ===========================================================
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from idemd import errors
from idemd.execute import EffectContext, Outcome, Result, execute_once

__all__ = [
    "HEADER_DETAIL",
    "HEADER_OPERATION_ID",
    "HEADER_REASON",
    "HEADER_VERDICT",
    "ConsumerSettings",
    "Handler",
    "Message",
    "NoIdentity",
    "Verdict",
    "consume",
    "operation_key",
    "verdict_for",
]

#: The headers a dead-lettered or parked copy carries (the same as the Rust client's).
HEADER_VERDICT = "x-idemd-verdict"
HEADER_REASON = "x-idemd-reason"
HEADER_OPERATION_ID = "x-idemd-operation-id"
HEADER_DETAIL = "x-idemd-detail"


@dataclass(frozen=True)
class Message:
    """A message as the decision core sees it, whatever broker delivered it."""

    #: The producer's message id (AMQP ``message_id``, JetStream ``Nats-Msg-Id``).
    message_id: str | None
    body: bytes
    #: Deliveries so far, this one included, where the broker counts (JetStream).
    delivery_count: int | None = None
    #: Whether the broker says it delivered this message before.
    redelivered: bool = False


class NoIdentity(Exception):
    """Raised by an identity function: the message carries no identity. The message
    is dead-lettered (NO_MESSAGE_IDENTITY) with this exception's text."""


Handler = Callable[[EffectContext, Message], Awaitable[Outcome]]


@dataclass(frozen=True)
class ConsumerSettings:
    """How messages become operations. ``identity`` takes a business reference from a
    message (raise :class:`NoIdentity` when there is none); ``None``: the message id.
    ``execute`` holds further :func:`~idemd.execute.execute_once` options (``lease``,
    ``max_attempts``, ``provider_deduplicates``, ``lookup``...)."""

    operation: str
    identity: Callable[[Message], str] | None = None
    #: Fingerprint the body as JSON (canonical form) instead of as bytes.
    json_body: bool = False
    #: Seconds before a message idemd cannot decide on now is tried again, when the
    #: server named no time.
    retry_delay: float = 1.0
    #: A consumer holds its message while it waits for another attempt: a short wait
    #: hands a busy operation back to the broker instead of blocking the queue.
    deadline: float = 5.0
    execute: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    """What to tell the broker about one message."""

    kind: Literal["ack", "dead_letter", "park", "retry_later"]
    #: For dead_letter and park: a stable UPPER_SNAKE reason.
    reason: str | None = None
    operation_id: str | None = None
    #: A short description (the error's kind; never the payload).
    detail: str = ""
    #: For retry_later: seconds before the message is tried again.
    after: float = 0.0
    #: For ack: the outcome (None for a replayed terminal failure).
    result: Result | None = None
    #: For ack: whether nothing ran now (the stored outcome was replayed).
    replayed: bool = False


def operation_key(settings: ConsumerSettings, message: Message) -> str | Verdict:
    """The idempotency key of ``message``'s operation, or the verdict that it has none."""
    if settings.identity is None:
        if not message.message_id:
            return Verdict("dead_letter", "NO_MESSAGE_IDENTITY", None, "the message has no message id")
        return message.message_id
    try:
        return settings.identity(message)
    except NoIdentity as missing:
        return Verdict("dead_letter", "NO_MESSAGE_IDENTITY", None, str(missing))


def _payload(settings: ConsumerSettings, message: Message) -> str | bytes | Verdict:
    if not settings.json_body:
        return message.body
    try:
        return message.body.decode("utf-8")
    except UnicodeDecodeError:
        return Verdict("dead_letter", "INVALID_MESSAGE", None, "the body is not UTF-8 JSON")


def verdict_for(outcome: Result | BaseException, retry_delay: float = 1.0) -> Verdict:
    """What to tell the broker once execute-once returned ``outcome`` or raised it."""
    if isinstance(outcome, Result):
        return Verdict("ack", operation_id=outcome.operation_id, result=outcome,
                       replayed=outcome.replayed)
    operation_id = getattr(outcome, "operation_id", None)
    detail = type(outcome).__name__
    if isinstance(outcome, errors.OperationFailedError):
        # A terminal failure is the operation's outcome, replayed to every delivery.
        return Verdict("ack", operation_id=operation_id, detail=outcome.reason,
                       replayed=outcome.replayed)
    if isinstance(outcome, errors.ConflictError):
        return Verdict("dead_letter", "IDEMPOTENCY_KEY_REUSED", operation_id,
                       "the same identity was used with another body")
    if isinstance(outcome, errors.ResultExpiredError):
        return Verdict("dead_letter", "RESULT_EXPIRED", operation_id, detail)
    if isinstance(outcome, (errors.InvalidArgumentError, errors.RequestTooLargeError)):
        return Verdict("dead_letter", "INVALID_MESSAGE", operation_id, detail)
    if isinstance(outcome, errors.NeedsReconciliationError):
        return Verdict("park", "NEEDS_RECONCILIATION", operation_id,
                       f"attempt budget spent on unknown outcomes ({outcome.attempts} attempts)")
    if isinstance(outcome, errors.OutcomeUnknownError):
        return Verdict("park", "OUTCOME_UNKNOWN", operation_id, detail)
    if isinstance(outcome, errors.PendingError):
        return Verdict("retry_later", operation_id=operation_id, detail=detail,
                       after=outcome.retry_after)
    if isinstance(outcome, (errors.IdemError, ConnectionError, TimeoutError)):
        # Not ended, or not known to this call: nothing is acknowledged as done.
        return Verdict("retry_later", operation_id=operation_id, detail=detail, after=retry_delay)
    raise TypeError(f"not an outcome of execute_once: {outcome!r}")


async def consume(client: Any, settings: ConsumerSettings, message: Message,
                  handler: Handler) -> Verdict:
    """Runs ``handler`` at most once for ``message``'s operation and returns the verdict.
    An exception the handler raises is reported to idemd (outcome unknown) and the
    message parked; it does not propagate."""
    key = operation_key(settings, message)
    if isinstance(key, Verdict):
        return key
    payload = _payload(settings, message)
    if isinstance(payload, Verdict):
        return payload

    async def effect(context: EffectContext) -> Outcome:
        return await handler(context, message)

    try:
        result = await execute_once(client, settings.operation, key, payload, effect,
                                    deadline=settings.deadline, **settings.execute)
    except (errors.IdemError, ConnectionError, TimeoutError) as refused:
        return verdict_for(refused, settings.retry_delay)
    return verdict_for(result, settings.retry_delay)
