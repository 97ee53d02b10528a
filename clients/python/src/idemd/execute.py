"""``execute_once``: the client protocol of README "The client protocol", done right.

* A fresh random ``claim_token`` per attempt, re-sent unchanged (with the whole Claim)
  after UNAVAILABLE or a lost reply.
* The lease and the attempt deadline are counted from the first send of the Claim
  (or Renew) that granted them; the effect is never started while the lease may be
  running out (it is renewed first), is renewed while it runs, and is cancelled at the
  attempt deadline (then Fail UNKNOWN).
* The effect's outcome maps to Complete / Fail TERMINAL / RETRYABLE / UNKNOWN.
* Completed replays without running the effect; Pending waits (Claim ``wait``,
  ``retry_after``); NeedsReconciliation or an outcome this client does not know never
  executes; LEASE_LOST looks the operation up and answers with what is stored, never
  redoing the effect.
* ReconcileFirst: an earlier attempt may have taken effect. With a ``lookup`` the
  provider is asked first; a negative answer is trusted only once the earlier
  attempt's deadline has passed (``previous_attempt_deadline``; when the server leaves
  it out, conservatively a whole attempt duration from the Claim). Without a
  ``lookup`` the effect runs with ``ctx.previous_outcome_unknown`` set and must pass
  ``ctx.operation_id`` to the provider as its idempotency key.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from idemd.client import seconds
from idemd.errors import (
    AttemptDeadlinePassedError,
    AttemptTimeoutError,
    IdemError,
    LeaseLostError,
    NeedsReconciliationError,
    OperationFailedError,
    OutcomeUnknownError,
    PendingError,
    StateForbidsError,
    StatusError,
    SupersededError,
    UnrecognisedOutcomeError,
)
from idemd.proto import pb

if TYPE_CHECKING:
    from idemd.client import Client

T = TypeVar("T")

#: The longest ``wait`` one Claim asks for while the operation is pending.
MAX_CLAIM_WAIT = 20.0


# ---- what an effect returns ---------------------------------------------------


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
    #: The server's ``previous_attempt_deadline`` in seconds from the Claim's send,
    #: None when it left it out.
    previous_attempt_deadline: float | None
    #: ``time.monotonic()`` instant after which the earlier attempt's effect is no
    #: longer in flight (conservative when the server sent no deadline).
    previous_attempt_settles_at: float | None
    #: ``time.monotonic()`` instant at which the effect is cancelled.
    cancel_at: float

    def previous_attempt_settled(self) -> bool:
        settles_at = self.previous_attempt_settles_at
        return settles_at is None or time.monotonic() >= settles_at


Effect = Callable[[EffectContext], Awaitable[Outcome]]
#: Asked on ReconcileFirst: the earlier attempt's outcome as the provider has it
#: (looked up by ``ctx.operation_id`` or the caller's stable reference), None if the
#: provider has nothing.
Lookup = Callable[[EffectContext], Awaitable[Success | Terminal | None]]


def previous_attempt_settles_at(
    outcome: pb.ReconcileFirst, sent_at: float
) -> tuple[float | None, float]:
    """(the server's previous_attempt_deadline, the monotonic instant it ends).

    Counted from the Claim's first send. Absent, the earlier attempt may have started
    just before this Claim, so it may run a whole attempt duration from it.
    """
    if outcome.HasField("previous_attempt_deadline"):
        given = seconds(outcome.previous_attempt_deadline)
        return given, sent_at + given
    return None, sent_at + seconds(outcome.ownership.attempt_deadline)


def _replayed(completed: pb.Completed) -> Result:
    if completed.WhichOneof("outcome") == "error" or completed.state == pb.OPERATION_STATE_FAILED:
        raise OperationFailedError(completed.operation_id, completed.error, replayed=True)
    return Result(
        operation_id=completed.operation_id,
        body=completed.result.body,
        content_type=completed.result.content_type,
        metadata=dict(completed.result.metadata),
        attempts=completed.attempts,
        replayed=True,
    )


def _request_identity(payload: str | bytes | Mapping[str, Any] | list[Any]) -> dict[str, Any]:
    if isinstance(payload, str):
        return {"json_payload": payload}
    if isinstance(payload, bytes):
        return {"bytes_payload": payload}
    return {"json_payload": json.dumps(payload, separators=(",", ":"), ensure_ascii=False)}


async def execute_once(
    client: Client,
    operation: str,
    key: str,
    payload: str | bytes | Mapping[str, Any] | list[Any] | None,
    effect: Effect,
    *,
    lease: float = 30.0,
    attempt_duration: float = 300.0,
    deadline: float = 60.0,
    lookup: Lookup | None = None,
    fingerprint: bytes | None = None,
    max_attempts: int = 0,
    retention: float | None = None,
    operation_deadline: float | None = None,
    lookup_interval: float = 1.0,
) -> Result:
    """Runs ``effect`` at most once for the intent ``(operation, key, payload)``.

    ``payload`` identifies the request: a ``str`` is sent as a JSON document, a
    mapping or list is serialised to one, ``bytes`` are opaque; or pass ``payload=None``
    and a ``fingerprint`` (:mod:`idemd.fingerprint`). ``key`` must be made once per
    business intent and persisted before the first call.

    ``lease`` and ``attempt_duration`` (seconds) go to the Claim (the attempt duration
    is fixed by the scope's first Claim). ``deadline`` bounds the time spent claiming
    and waiting for another attempt (``0``: raise :class:`~idemd.errors.PendingError`
    at the first Pending); once this call owns the operation, its attempt deadline
    bounds it instead.

    Returns the :class:`Result` (recorded now or replayed). Raises
    :class:`~idemd.errors.OperationFailedError` for a terminal error (recorded now or
    replayed), :class:`~idemd.errors.OutcomeUnknownError` when this attempt's outcome
    is unknown, :class:`~idemd.errors.NeedsReconciliationError`,
    :class:`~idemd.errors.PendingError`, :class:`~idemd.errors.SupersededError`,
    :class:`~idemd.errors.UnrecognisedOutcomeError`, or a
    :class:`~idemd.errors.StatusError` such as :class:`~idemd.errors.ConflictError`.
    """
    if payload is None:
        if fingerprint is None:
            raise ValueError("give a payload or a fingerprint")
        identity: dict[str, Any] = {"fingerprint": fingerprint}
    else:
        identity = _request_identity(payload)
    end = time.monotonic() + deadline
    wait: float | None = None
    while True:
        request = client.claim_request(
            operation,
            key,
            **identity,
            claim_token=secrets.token_bytes(16),
            lease=lease,
            max_attempt_duration=attempt_duration,
            max_attempts=max_attempts,
            retention=retention,
            operation_deadline=operation_deadline,
            wait=wait,
        )
        response, sent_at = await client.send_claim(request, deadline=max(end, time.monotonic() + 1.0))
        outcome = response.WhichOneof("outcome")
        if outcome == "acquired":
            attempt = _Attempt(client, response.acquired.ownership, sent_at, lease, None, lookup, lookup_interval)
            if (result := await attempt.run(effect)) is not None:
                return result
            wait = None  # Retryable: claim again for the next attempt
        elif outcome == "reconcile_first":
            first = response.reconcile_first
            attempt = _Attempt(client, first.ownership, sent_at, lease, first, lookup, lookup_interval)
            if (result := await attempt.run(effect)) is not None:
                return result
            wait = None
        elif outcome == "completed":
            return _replayed(response.completed)
        elif outcome == "pending":
            pending = response.pending
            retry_after = seconds(pending.retry_after)
            remaining = end - time.monotonic()
            reason = pb.PendingReason.Name(pending.reason)
            if remaining <= 0.05:
                raise PendingError(pending.operation_id, retry_after, reason)
            waited = time.monotonic() - sent_at
            if wait is not None and waited < min(0.05, wait):
                # The server did not wait (clamped): do not spin.
                await asyncio.sleep(min(retry_after, remaining, 1.0))
            wait = max(0.0, min(MAX_CLAIM_WAIT, remaining - 0.05))
        elif outcome == "needs_reconciliation":
            needs = response.needs_reconciliation
            raise NeedsReconciliationError(needs.operation_id, needs.fence, needs.attempts)
        else:
            raise UnrecognisedOutcomeError(f"Claim answered {outcome!r}; nothing was executed")


class _Lost(Exception):
    """Raised inside an attempt when its fence was refused (another owner took over)."""


class _Stopped(Exception):
    """Raised inside an attempt when its time is up (the attempt deadline is near)."""


class _Attempt:
    """One owned attempt: renews the lease, races the effect against the deadline and
    a lost lease, records the outcome."""

    def __init__(
        self,
        client: Client,
        ownership: pb.Ownership,
        sent_at: float,
        lease: float,
        reconcile_first: pb.ReconcileFirst | None,
        lookup: Lookup | None,
        lookup_interval: float,
    ) -> None:
        self.client = client
        self.operation_id = ownership.operation_id
        self.fence = ownership.fence
        self.attempt = ownership.attempt
        self.lease = lease
        self.granted = seconds(ownership.lease)
        self.lease_expires_at = sent_at + self.granted
        self.deadline_at = sent_at + seconds(ownership.attempt_deadline)
        duration = seconds(ownership.attempt_deadline)
        # Room left before the deadline to cancel the effect and report it.
        self.margin = max(0.05, min(1.0, duration / 10))
        self.cancel_at = self.deadline_at - self.margin
        self.lookup = lookup
        self.lookup_interval = lookup_interval
        self.lost = asyncio.Event()
        self.lost_error: StatusError | None = None
        given: float | None = None
        settles_at: float | None = None
        if reconcile_first is not None:
            given, settles_at = previous_attempt_settles_at(reconcile_first, sent_at)
        self.ctx = EffectContext(
            operation_id=ownership.operation_id,
            fence=ownership.fence,
            attempt=ownership.attempt,
            max_attempts=ownership.max_attempts,
            previous_outcome_unknown=reconcile_first is not None,
            previous_fence=reconcile_first.previous_fence if reconcile_first else None,
            previous_attempt_deadline=given,
            previous_attempt_settles_at=settles_at,
            cancel_at=self.cancel_at,
        )

    # ---- the lease ---------------------------------------------------------

    async def renew(self) -> None:
        """Renews once (re-sent after transient failures); a refusal sets ``lost``."""
        try:
            response, sent_at = await self.client.send_renew(
                self.operation_id, self.fence, lease=self.lease, deadline=self.cancel_at
            )
        except (LeaseLostError, AttemptDeadlinePassedError) as refusal:
            self.lost_error = refusal
            self.lost.set()
            return
        self.granted = seconds(response.lease)
        self.lease_expires_at = sent_at + self.granted
        self.deadline_at = min(self.deadline_at, sent_at + seconds(response.attempt_deadline))

    async def keep_renewing(self) -> None:
        # Once the lease reaches the attempt deadline, Renew cannot extend it further.
        while not self.lost.is_set() and self.lease_expires_at < self.deadline_at - 0.001:
            due = self.lease_expires_at - self.granted * 2 / 3
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            try:
                await self.renew()
            except StateForbidsError:
                return  # marked UNKNOWN by a Claim: no renewals, writes still allowed
            except StatusError:
                # Transient failures outlasted the retry policy: try again shortly; the
                # lease may lapse, in which case a new owner reconciles first.
                await asyncio.sleep(min(1.0, max(0.05, self.granted / 10)))

    async def guarded(self, awaitable: Awaitable[T]) -> T:
        """Awaits ``awaitable``, cancelling it when the lease is lost (raises _Lost) or
        the attempt's time is up (raises _Stopped)."""
        task = asyncio.ensure_future(awaitable)
        lost = asyncio.ensure_future(self.lost.wait())
        try:
            done, _ = await asyncio.wait(
                {task, lost},
                timeout=max(0.0, self.cancel_at - time.monotonic()),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            lost.cancel()
        if task in done:
            return task.result()
        task.cancel()
        await asyncio.wait({task}, timeout=self.margin / 2)
        self._raise_if_lost()
        raise _Stopped()

    def _raise_if_lost(self) -> None:
        if self.lost.is_set():
            if isinstance(self.lost_error, AttemptDeadlinePassedError):
                raise _Stopped()  # nobody took over: this attempt's time is up
            raise _Lost()

    # ---- the attempt -----------------------------------------------------------

    async def run(self, effect: Effect) -> Result | None:
        """The attempt's answer, or None when a retry was scheduled (claim again)."""
        keeper = asyncio.create_task(self.keep_renewing())
        try:
            return await self._run(effect)
        except _Lost:
            return await self._superseded()
        except _Stopped:
            await self._fail_unknown(
                "attempt_deadline", "the effect was cancelled at the attempt deadline"
            )
            raise AttemptTimeoutError(
                self.operation_id, "the effect was cancelled at the attempt deadline; its outcome is unknown"
            ) from None
        finally:
            keeper.cancel()

    async def _run(self, effect: Effect) -> Result | None:
        if self.ctx.previous_outcome_unknown and self.lookup is not None:
            found = await self._look_up_provider()
            if found is not None:
                return await self._record(found)
        # Never start the effect on a lease that may be running out, nor so close to
        # the attempt deadline that it would be cancelled as soon as it started.
        if self.lease_expires_at - time.monotonic() < self.granted / 2:
            await self.renew()
            self._raise_if_lost()
        if self.cancel_at - time.monotonic() < self.margin:
            raise _Stopped()
        try:
            outcome = await self.guarded(effect(self.ctx))
        except (_Lost, _Stopped):
            raise
        except Exception as error:  # the effect failed in a way nobody can tell
            await self._fail_unknown("effect_raised", type(error).__name__)
            raise OutcomeUnknownError(
                self.operation_id, f"the effect raised {type(error).__name__}; its outcome is unknown"
            ) from error
        return await self._record(outcome)

    async def _look_up_provider(self) -> Success | Terminal | None:
        assert self.lookup is not None
        while True:
            try:
                found = await self.guarded(self.lookup(self.ctx))
            except (_Lost, _Stopped):
                raise
            except Exception as error:
                await self._fail_unknown("lookup_raised", type(error).__name__)
                raise OutcomeUnknownError(
                    self.operation_id, "the provider lookup failed; the earlier attempt's outcome is unknown"
                ) from error
            if found is not None or self.ctx.previous_attempt_settled():
                return found
            # Nothing found yet proves nothing while the earlier attempt may still run.
            settles_at = self.ctx.previous_attempt_settles_at or 0.0
            now = time.monotonic()
            if settles_at >= self.cancel_at:
                # Not settled within this attempt: look until then, never execute.
                if now + self.lookup_interval >= self.cancel_at:
                    await self._fail_unknown(
                        "previous_attempt_unsettled",
                        "the earlier attempt may still be running and the provider has no record yet",
                    )
                    raise OutcomeUnknownError(
                        self.operation_id,
                        "the earlier attempt's outcome is still unknown (its deadline outlasts this attempt)",
                    )
            await self.guarded(asyncio.sleep(max(0.0, min(self.lookup_interval, settles_at - now))))

    async def _record(self, outcome: Outcome) -> Result | None:
        try:
            if isinstance(outcome, Success):
                await self.client.complete(
                    self.operation_id,
                    self.fence,
                    outcome.body,
                    content_type=outcome.content_type,
                    metadata=outcome.metadata,
                    deadline=self.deadline_at,
                )
                return Result(
                    operation_id=self.operation_id,
                    body=outcome.body,
                    content_type=outcome.content_type,
                    metadata=dict(outcome.metadata),
                    attempts=self.attempt,
                    replayed=False,
                )
            if isinstance(outcome, Terminal):
                await self.client.fail(
                    self.operation_id,
                    self.fence,
                    pb.FAIL_DISPOSITION_TERMINAL,
                    code=outcome.code,
                    message=outcome.message,
                    metadata=outcome.metadata,
                    deadline=self.deadline_at,
                )
                raise OperationFailedError(
                    self.operation_id,
                    pb.OperationError(
                        reason=pb.FAILURE_REASON_TERMINAL,
                        code=outcome.code,
                        message=outcome.message,
                        metadata=outcome.metadata,
                    ),
                    replayed=False,
                )
            if isinstance(outcome, Retryable):
                failed = await self.client.fail(
                    self.operation_id,
                    self.fence,
                    pb.FAIL_DISPOSITION_RETRYABLE,
                    code=outcome.code,
                    message=outcome.message,
                    metadata=outcome.metadata,
                    retry_after=outcome.retry_after,
                    deadline=self.deadline_at,
                )
                if failed.state == pb.OPERATION_STATE_RETRY_WAIT:
                    return None
                raise OperationFailedError(
                    self.operation_id,
                    pb.OperationError(
                        reason=failed.reason,
                        code=outcome.code,
                        message=outcome.message,
                        metadata=outcome.metadata,
                    ),
                    replayed=False,
                )
            if isinstance(outcome, Unknown):
                await self._fail_unknown(outcome.code, outcome.message)
                raise OutcomeUnknownError(self.operation_id, "the effect's outcome is unknown")
            raise TypeError(f"an effect returns Success, Terminal, Retryable or Unknown, not {outcome!r}")
        except LeaseLostError:
            return await self._superseded()
        except AttemptDeadlinePassedError:
            raise OutcomeUnknownError(
                self.operation_id,
                "the attempt deadline passed before the outcome was recorded; a reconciler must settle it",
            ) from None

    async def _fail_unknown(self, code: str, message: str) -> None:
        """Best effort: an attempt whose outcome is unknown says so; if it cannot, its
        lease runs out and the next owner reconciles first all the same."""
        try:
            await self.client.fail(
                self.operation_id,
                self.fence,
                pb.FAIL_DISPOSITION_UNKNOWN,
                code=code,
                message=message,
                deadline=self.deadline_at,
            )
        except IdemError:
            pass

    async def _superseded(self) -> Result:
        """LEASE_LOST: answer with what is stored; never redo the effect."""
        found = await self.client.lookup(operation_id=self.operation_id)
        operation = found.operation
        if operation.state == pb.OPERATION_STATE_SUCCEEDED:
            return Result(
                operation_id=operation.operation_id,
                body=operation.result.body,
                content_type=operation.result.content_type,
                metadata=dict(operation.result.metadata),
                attempts=operation.attempt,
                replayed=True,
            )
        if operation.state == pb.OPERATION_STATE_FAILED:
            raise OperationFailedError(operation.operation_id, operation.error, replayed=True)
        raise SupersededError(operation)
