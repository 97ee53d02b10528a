"""What an effect returns (its :data:`Outcome`), what ``execute_once`` answers (a
:class:`Result`) and what the effect learns of the attempt it runs in
(:class:`EffectContext`): the values the caller, the protocol and both clients share.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Success:
    """The effect happened: ``body`` is recorded (Complete) and replayed to retries."""

    body: bytes
    content_type: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Terminal:
    """The effect ended in a final error: recorded (Fail TERMINAL) and replayed."""

    code: str
    message: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Retryable:
    """The effect certainly did not happen: a later attempt may try again
    (Fail RETRYABLE) after ``retry_after`` seconds, within the attempt budget."""

    code: str
    message: str = ""
    retry_after: float = 1.0
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Unknown:
    """The effect may or may not have happened (Fail UNKNOWN): the next owner
    reconciles first. An effect that raises counts as Unknown too."""

    code: str = "outcome_unknown"
    message: str = ""


Outcome = Success | Terminal | Retryable | Unknown


@dataclass(frozen=True)
class Result:
    """The recorded result of the operation, made now or replayed."""

    operation_id: str
    body: bytes
    content_type: str
    metadata: Mapping[str, str]
    #: Attempts the operation took (this one included).
    attempts: int
    #: True when the result was stored by an earlier call and nothing ran now.
    replayed: bool

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class EffectContext:
    """What the effect (and ``lookup``) learn about the attempt they run in."""

    #: Stable for the whole operation: give it to the provider as its idempotency key.
    operation_id: str
    fence: int
    #: 1-based; counts every owner, takeovers included.
    attempt: int
    max_attempts: int
    #: ReconcileFirst: an earlier attempt may have taken effect.
    previous_outcome_unknown: bool
    previous_fence: int | None
    #: The server's ``previous_attempt_deadline`` in seconds (what was left of the
    #: earlier attempt when the server answered), None when it left it out.
    previous_attempt_deadline: float | None
    #: ``time.monotonic()`` instant after which the earlier attempt's effect is no
    #: longer in flight (conservative when the server sent no deadline).
    previous_attempt_settles_at: float | None
    #: ``time.monotonic()`` instant at which the effect is cancelled.
    cancel_at: float
    #: Set when the effect must stop: its attempt deadline is reached or its lease was
    #: lost. The blocking client cannot interrupt an effect, so a blocking effect must
    #: honour it (and :meth:`remaining`): whatever it returns after this is set is
    #: never recorded as its outcome.
    cancelled: threading.Event = field(default_factory=threading.Event, compare=False)

    def previous_attempt_settled(self, at: float | None = None) -> bool:
        """Whether the earlier attempt's effect was no longer in flight at the
        ``time.monotonic()`` instant ``at`` (default: now). A provider read that finds
        nothing proves something only if it *started* after that: pass the instant
        taken just before the read."""
        settles_at = self.previous_attempt_settles_at
        return settles_at is None or (time.monotonic() if at is None else at) >= settles_at

    def remaining(self) -> float:
        """Seconds until the effect is cancelled (0 when past): bound provider calls by it."""
        return max(0.0, self.cancel_at - time.monotonic())
