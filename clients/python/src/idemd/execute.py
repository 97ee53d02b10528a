"""``execute_once`` on asyncio: the client protocol (:mod:`idemd.protocol`, README "The
client protocol") driven with ``await``.

The effect runs as a task next to the lease's renewals; when the lease is lost or the
attempt deadline is near, the task is cancelled (``ctx.cancelled`` is set as well).
Every decision (what to claim, when to renew, what an answer means, how an outcome is
recorded) lives in :mod:`idemd.protocol`, shared with the blocking
:func:`idemd.sync.execute_once`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from idemd.protocol import (
    MAX_CLAIM_WAIT,
    Attempt,
    Call,
    EffectContext,
    Guarded,
    Outcome,
    Result,
    Retryable,
    Sleep,
    StartRenewing,
    Step,
    Steps,
    Stopped,
    StopRenewing,
    Success,
    Terminal,
    Unknown,
    execute_once_steps,
    previous_attempt_settles_at,
)
from idemd.selector import Selector

T = TypeVar("T")

Effect = Callable[[EffectContext], Awaitable[Outcome]]
#: Asked on ReconcileFirst: the earlier attempt's outcome as the provider has it
#: (looked up by ``ctx.operation_id`` or the caller's stable reference), None if the
#: provider has nothing. It must read the provider's current state (not a cache, not
#: a lagging replica): a "nothing" is trusted once the earlier attempt has settled.
Lookup = Callable[[EffectContext], Awaitable[Success | Terminal | None]]


class AsyncCalls(Protocol):
    """What :func:`execute_once` needs of a client: the calls that the protocol's steps
    name (:class:`idemd.protocol.Call`), awaited. :class:`idemd.Client` has them; the
    client stands above this module, so it is named by what it does, not imported."""

    def send_claim(self, *args: Any, **kwargs: Any) -> Awaitable[Any]: ...
    def send_renew(self, *args: Any, **kwargs: Any) -> Awaitable[Any]: ...
    def complete(self, *args: Any, **kwargs: Any) -> Awaitable[Any]: ...
    def fail(self, *args: Any, **kwargs: Any) -> Awaitable[Any]: ...
    def lookup(self, *args: Any, **kwargs: Any) -> Awaitable[Any]: ...


__all__ = [
    "MAX_CLAIM_WAIT",
    "Effect",
    "EffectContext",
    "Lookup",
    "Outcome",
    "Result",
    "Retryable",
    "Success",
    "Terminal",
    "Unknown",
    "execute_once",
    "previous_attempt_settles_at",
]


async def execute_once(
    client: AsyncCalls,
    operation: str,
    key: str,
    payload: str | bytes | Mapping[str, Any] | list[Any] | None,
    effect: Effect,
    *,
    lease: float = 30.0,
    attempt_duration: float = 300.0,
    deadline: float = 60.0,
    lookup: Lookup | None = None,
    provider_deduplicates: bool = False,
    fingerprint: bytes | None = None,
    max_attempts: int = 0,
    retention: float | None = None,
    operation_deadline: float | None = None,
    lookup_interval: float = 1.0,
    selector: Selector | None = None,
    previous_fingerprints: Sequence[bytes] = (),
) -> Result:
    """Runs ``effect`` at most once for the intent ``(operation, key, payload)``.

    ``payload`` identifies the request: a ``str`` is sent as a JSON document, a
    mapping or list is serialised to one, ``bytes`` are opaque; or pass ``payload=None``
    and a ``fingerprint`` (:mod:`idemd.fingerprint`). ``key`` must be made once per
    business intent and persisted before the first call. ``selector``
    (:class:`~idemd.selector.Selector`) names the fields of a JSON payload that define
    the request: a change outside them replays, one inside them conflicts; a payload it
    cannot apply to raises :class:`~idemd.errors.InvalidArgumentError` before any RPC.

    ``previous_fingerprints`` (at most 4, 32 bytes each; README "Changing the
    normalisation"): while a deployment that changes how this request is normalised
    rolls out, the same request's fingerprints under the earlier normalisations
    (``old_selector.fingerprint(payload)``, :func:`~idemd.fingerprint.fingerprint_json`
    of the old document). Every Claim of this call carries them, and an operation the
    earlier version claimed under one of them is this same request (replayed, resumed,
    taken over), not a conflict. A list the server would refuse raises
    :class:`~idemd.errors.InvalidArgumentError` before any RPC. Empty (the default)
    outside such a window.

    ``lease`` and ``attempt_duration`` (seconds) go to the Claim (the attempt duration
    is fixed by the scope's first Claim). ``deadline`` bounds the time spent claiming
    and waiting for another attempt (``0``: raise :class:`~idemd.errors.PendingError`
    at the first Pending); once this call owns the operation, its attempt deadline
    bounds it instead. An attempt that declines before the effect (Fail NOT_STARTED:
    too little lease or attempt left, or an earlier attempt's doubt outlasting it), or
    whose effect was Retryable, is followed by a new Claim only within ``deadline``
    (past it: :class:`~idemd.errors.PendingError`).

    When idemd answers ReconcileFirst (an earlier attempt may have taken effect), the
    call site must have said how this call can tell:

    * ``lookup``: asked first (``lookup(ctx)``, reading the provider's *current*
      state by ``ctx.operation_id`` or the caller's stable reference). What it finds
      is recorded at once; "nothing" counts only from a lookup started once the
      earlier attempt has settled (``ctx.previous_attempt_settles_at``): until then
      it asks again every ``lookup_interval``, and an attempt that would end first
      declines (Fail NOT_STARTED) and claims again;
    * ``provider_deduplicates=True``: the provider honours the idempotency key it is
      given, so the effect runs again with ``ctx.previous_outcome_unknown`` set and
      must pass ``ctx.operation_id`` to the provider as that key;
    * neither: the effect never runs. The attempt declines (Fail NOT_STARTED, which
      keeps the earlier attempt's doubt and deadline) and the call raises
      :class:`~idemd.errors.OutcomeUnknownError`; a reconciler (or a call with a
      lookup) settles the operation.

    With both, the lookup decides.

    Returns the :class:`Result` (recorded now or replayed). Raises
    :class:`~idemd.errors.OperationFailedError` for a terminal error (recorded now or
    replayed), :class:`~idemd.errors.OutcomeUnknownError` when this attempt's outcome
    is unknown, :class:`~idemd.errors.NeedsReconciliationError`,
    :class:`~idemd.errors.PendingError`, :class:`~idemd.errors.SupersededError`,
    :class:`~idemd.errors.UnrecognisedOutcomeError`, or a
    :class:`~idemd.errors.StatusError` such as :class:`~idemd.errors.ConflictError`.
    """
    steps = execute_once_steps(
        operation,
        key,
        payload,
        has_lookup=lookup is not None,
        provider_deduplicates=provider_deduplicates,
        lease=lease,
        attempt_duration=attempt_duration,
        deadline=deadline,
        fingerprint=fingerprint,
        max_attempts=max_attempts,
        retention=retention,
        operation_deadline=operation_deadline,
        lookup_interval=lookup_interval,
        selector=selector,
        previous_fingerprints=previous_fingerprints,
    )
    return await _Driver(client, effect, lookup).run(steps)


class _Driver:
    """Performs the protocol's steps with asyncio."""

    def __init__(self, client: AsyncCalls, effect: Effect, lookup: Lookup | None) -> None:
        self.client = client
        self.effect = effect
        self.lookup = lookup
        self.renewals: dict[Attempt, asyncio.Task[None]] = {}
        self.lost: dict[Attempt, asyncio.Event] = {}

    async def run(self, steps: Steps[T]) -> T:
        """:func:`idemd.protocol.run_steps`, awaiting each step."""
        answer: Any = None
        error: BaseException | None = None
        while True:
            try:
                step = steps.throw(error) if error is not None else steps.send(answer)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            answer, error = None, None
            try:
                answer = await self.perform(step)
            except BaseException as raised:  # thrown into the protocol, which re-raises it
                error = raised

    async def perform(self, step: Step) -> Any:
        if isinstance(step, Call):
            return await getattr(self.client, step.method)(*step.args, **step.kwargs)
        if isinstance(step, Sleep):
            await asyncio.sleep(step.seconds)
            return None
        if isinstance(step, Guarded):
            return await self.guarded(step)
        if isinstance(step, StartRenewing):
            lost = self.lost[step.attempt] = asyncio.Event()
            step.attempt.notify_lost = lost.set
            self.renewals[step.attempt] = asyncio.create_task(self.run(step.attempt.keep_renewing()))
            return None
        if isinstance(step, StopRenewing):
            renewals = self.renewals.pop(step.attempt, None)
            if renewals is not None:
                renewals.cancel()
            self.lost.pop(step.attempt, None)
            return None
        raise TypeError(f"not a protocol step: {step!r}")

    async def guarded(self, step: Guarded) -> Any:
        """Awaits the effect, the lookup or the pause, cancelling it when the lease is
        lost or the attempt's time is up (then raises the attempt's interruption)."""
        attempt = step.attempt
        if step.what == "effect":
            awaitable: Awaitable[Any] = self.effect(attempt.ctx)
        elif step.what == "lookup":
            assert self.lookup is not None  # the protocol asks only when there is one
            awaitable = self.lookup(attempt.ctx)
        else:
            awaitable = asyncio.sleep(step.seconds)
        task = asyncio.ensure_future(awaitable)
        lost = asyncio.ensure_future(self.lost[attempt].wait())
        try:
            done, _ = await asyncio.wait(
                {task, lost},
                timeout=max(0.0, attempt.cancel_at - time.monotonic()),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            lost.cancel()
        if task in done:
            return task.result()
        attempt.ctx.cancelled.set()
        task.cancel()
        await asyncio.wait({task}, timeout=attempt.margin / 2)
        raise attempt.interruption() or Stopped()
