"""The client protocol of README "The client protocol", written once for both clients.

The asyncio :func:`idemd.execute.execute_once` and the blocking
:func:`idemd.sync.execute_once` run the same decisions: the protocol is a generator
that *yields the steps it needs* (an RPC, a pause, running the effect under the
attempt's guard, starting and stopping the lease's renewals) and is sent each step's
answer back, or has its exception thrown in. A driver only performs steps (with
asyncio, or with blocking calls and a renewal thread); what to claim, when to renew,
how an outcome is recorded, what the deadlines are and what an answer means are
decided here and nowhere else.

* A fresh random ``claim_token`` per attempt, re-sent unchanged (with the whole Claim)
  after UNAVAILABLE or a lost reply (the client's :mod:`idemd.retry` does the re-sends).
* The lease and the attempt deadline are counted from the start of the send of the
  Claim (or Renew) that was answered (the server counts them from its handling of
  that very send; a re-send is a call of its own, and an abandoned send's reply is
  never read); the effect is never started while the lease may be
  running out (it is renewed first), is renewed while it runs, and is stopped at the
  attempt deadline (then Fail UNKNOWN).
* An attempt that does not start the effect (too little of the attempt left, or of the
  lease even after one Renew, or an earlier attempt's doubt that outlasts it) declines:
  Fail NOT_STARTED, which hands the operation on as it was (released, or still in the
  doubt it took over, with that doubt's deadline), and claims again within the
  caller's deadline; FAILED (the budget or the operation deadline spent) is answered
  with what is stored.
* The effect's outcome maps to Complete / Fail TERMINAL / RETRYABLE / UNKNOWN.
* Completed replays without running the effect; Pending waits (Claim ``wait``,
  ``retry_after``); NeedsReconciliation or an outcome this client does not know never
  executes; LEASE_LOST looks the operation up and answers with what is stored, never
  redoing the effect.
* ReconcileFirst: an earlier attempt may have taken effect, and the caller must have
  said how this call can tell. With a ``lookup`` the provider is asked first; a
  positive answer is recorded at once, a negative one counts only if the lookup was
  *started* at or after the moment the earlier attempt settles (its
  ``previous_attempt_deadline``; when the server leaves it out, conservatively a whole
  attempt duration from the Claim): a lookup observes the provider somewhere between
  its start and its answer, so one that started earlier may have missed an effect
  that landed while it ran. With ``provider_deduplicates`` (and no lookup) the effect
  runs with ``ctx.previous_outcome_unknown`` set and must pass ``ctx.operation_id`` to
  the provider as its idempotency key. With neither, the effect never runs: the
  attempt declines (NOT_STARTED keeps the earlier attempt's doubt and deadline) and
  the call raises :class:`~idemd.errors.OutcomeUnknownError` saying what to do.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

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
from idemd.outcome import (  # part of the protocol's vocabulary: handed on from here
    EffectContext as EffectContext,
    Outcome as Outcome,
    Result as Result,
    Retryable as Retryable,
    Success as Success,
    Terminal as Terminal,
    Unknown as Unknown,
)
from idemd.proto import pb
from idemd.retry import is_retryable
from idemd.selector import Selector
from idemd.wire import checked_previous_fingerprints, claim_request, seconds

T = TypeVar("T")

# The protocol's constants (docs/client-protocol.md, "The constants"), the same in
# every idemd client.

#: The longest ``wait`` one Claim asks for while the operation is pending.
MAX_CLAIM_WAIT = 20.0

#: With this little (or less) of the caller's deadline left, Pending is final; the
#: ``wait`` asked for is what is left less this.
PENDING_SLACK = 0.05

#: A Claim's sends get at least this long, whatever is left of the caller's deadline:
#: a deadline of zero means "do not wait", not "fail if idemd takes a moment".
MIN_CLAIM_TIME = 1.0

#: The longest pause before a Claim after a Pending the server did not wait on.
NO_SPIN_PAUSE = 1.0

#: What an attempt stopped at its deadline reports (Fail UNKNOWN). One value, so a
#: report sent early (the blocking client's watchdog) and the one sent when the effect
#: returns are the same request: idemd answers the second from the first's receipt.
ATTEMPT_DEADLINE_REPORT = ("attempt_deadline", "the effect was cancelled at the attempt deadline")

#: What an attempt that never started the effect reports (Fail NOT_STARTED). One value
#: for the same reason: the blocking client's watchdog may send it early.
NOT_STARTED_REPORT = (
    "not_started",
    "the effect was not started: too little of the lease or attempt was left, "
    "or an earlier attempt may still be running",
)

#: Why a ReconcileFirst without a lookup or a deduplicating provider never runs the
#: effect: the caller learns what to change.
CANNOT_CHECK_EARLIER_ATTEMPT = (
    "an earlier attempt may have taken effect and this call cannot check it: pass a lookup, "
    "or declare provider deduplication (provider_deduplicates=True) if the provider honours "
    "the key, or reconcile the operation"
)


def previous_attempt_settles_at(
    outcome: pb.ReconcileFirst, received_at: float
) -> tuple[float | None, float]:
    """(the server's previous_attempt_deadline, the monotonic instant it ends).

    Counted from the Claim's reply (``received_at``), the late end: the server measured
    the time left somewhere between the answered send and the reply, and a long-polled
    Claim may have been sent long before (where the lease counts from that send, the
    early end). Absent, the earlier attempt may have started just before the server
    took this Claim, so it may run a whole attempt duration from then.
    """
    if outcome.HasField("previous_attempt_deadline"):
        given = seconds(outcome.previous_attempt_deadline)
        return given, received_at + given
    return None, received_at + seconds(outcome.ownership.attempt_deadline)


# ---- the steps a driver performs ----------------------------------------------------


@dataclass(frozen=True)
class Call:
    """Call ``client.<method>(*args, **kwargs)`` (a method both clients have, re-sent
    as :mod:`idemd.retry` decides): its answer is sent back, its StatusError thrown in."""

    method: Literal["send_claim", "send_renew", "complete", "fail", "lookup"]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Guarded:
    """Run the effect, the provider lookup, or a pause (``seconds``) within the
    attempt: its answer (or exception) is sent back; when the lease is lost or the
    attempt's time is up first, :meth:`Attempt.interruption` is thrown in instead."""

    attempt: Attempt
    what: Literal["effect", "lookup", "sleep"]
    seconds: float = 0.0


@dataclass(frozen=True)
class StartRenewing:
    """Run :meth:`Attempt.keep_renewing` alongside, until :class:`StopRenewing`."""

    attempt: Attempt


@dataclass(frozen=True)
class StopRenewing:
    attempt: Attempt


Step = Call | Sleep | Guarded | StartRenewing | StopRenewing
Steps = Generator[Step, Any, T]


def run_steps(steps: Steps[T], perform: Callable[[Step], Any]) -> T:
    """Drives ``steps`` with a blocking ``perform`` (the asyncio driver is the same
    loop with ``await``). Every exception ``perform`` raises is thrown into the
    protocol, so its ``finally`` clauses (stop renewing) run as steps too."""
    answer: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = steps.throw(error) if error is not None else steps.send(answer)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        answer, error = None, None
        try:
            answer = perform(step)
        except BaseException as raised:  # thrown into the protocol, which re-raises it
            error = raised


# ---- execute_once -------------------------------------------------------------------


def _request_identity(payload: str | bytes | Mapping[str, Any] | list[Any]) -> dict[str, Any]:
    if isinstance(payload, str):
        return {"json_payload": payload}
    if isinstance(payload, bytes):
        return {"bytes_payload": payload}
    return {"json_payload": json.dumps(payload, separators=(",", ":"), ensure_ascii=False)}


def _selected_fingerprint(payload: str | bytes | Mapping[str, Any] | list[Any], selector: Selector) -> bytes:
    """The fingerprint of the fields ``selector`` picks from a JSON payload
    (docs/api.md, "Request selectors"); sent instead of the payload."""
    if isinstance(payload, bytes):
        raise ValueError("a selector applies to a JSON payload (str, mapping or list), not to bytes")
    return selector.fingerprint(payload)


def _stored(operation_id: str, result: pb.Result, attempts: int) -> Result:
    """The result an earlier call recorded, as this call answers it (nothing ran now)."""
    return Result(
        operation_id=operation_id,
        body=result.body,
        content_type=result.content_type,
        metadata=dict(result.metadata),
        attempts=attempts,
        replayed=True,
    )


def _replayed(completed: pb.Completed) -> Result:
    if completed.WhichOneof("outcome") == "error" or completed.state == pb.OPERATION_STATE_FAILED:
        raise OperationFailedError(completed.operation_id, completed.error, replayed=True)
    return _stored(completed.operation_id, completed.result, completed.attempts)


def execute_once_steps(
    operation: str,
    key: str,
    payload: str | bytes | Mapping[str, Any] | list[Any] | None,
    *,
    has_lookup: bool,
    provider_deduplicates: bool,
    lease: float,
    attempt_duration: float,
    deadline: float,
    fingerprint: bytes | None,
    max_attempts: int,
    retention: float | None,
    operation_deadline: float | None,
    lookup_interval: float,
    clock: Callable[[], float] = time.monotonic,
    new_claim_token: Callable[[], bytes] = lambda: secrets.token_bytes(16),
    selector: Selector | None = None,
    previous_fingerprints: Sequence[bytes] = (),
) -> Steps[Result]:
    """The whole of ``execute_once`` (see :func:`idemd.execute.execute_once`).

    ``clock`` (monotonic seconds) and ``new_claim_token`` are the only inputs besides
    the answers sent back: the shared protocol vectors (testdata/protocol/) drive the
    protocol with a scripted clock and numbered tokens."""
    # Checked before the first step: a list the server would refuse sends nothing.
    previous = checked_previous_fingerprints(previous_fingerprints)
    if payload is None:
        if fingerprint is None:
            raise ValueError("give a payload or a fingerprint")
        identity: dict[str, Any] = {"fingerprint": fingerprint}
    elif selector is not None and not selector.empty:
        identity = {"fingerprint": _selected_fingerprint(payload, selector)}
    else:
        identity = _request_identity(payload)
    end = clock() + deadline
    wait: float | None = None
    while True:
        request = claim_request(
            operation,
            key,
            **identity,
            claim_token=new_claim_token(),
            lease=lease,
            max_attempt_duration=attempt_duration,
            max_attempts=max_attempts,
            retention=retention,
            operation_deadline=operation_deadline,
            wait=wait,
            previous_fingerprints=previous,
        )
        response, sent_at = yield Call(
            "send_claim", (request,), {"deadline": max(end, clock() + MIN_CLAIM_TIME)}
        )
        received_at = clock()
        outcome = response.WhichOneof("outcome")
        if outcome in ("acquired", "reconcile_first"):
            first = response.reconcile_first if outcome == "reconcile_first" else None
            ownership = first.ownership if first is not None else response.acquired.ownership
            attempt = Attempt(
                ownership,
                (sent_at, received_at),
                lease,
                first,
                has_lookup,
                lookup_interval,
                provider_deduplicates=provider_deduplicates,
                clock=clock,
            )
            if (result := (yield from attempt.run())) is not None:
                return result
            # Retryable, or declined before the effect: claim again for the next
            # attempt, within the caller's deadline.
            if clock() >= end:
                raise PendingError(
                    attempt.operation_id, attempt.reclaim_after, pb.PendingReason.Name(attempt.reclaim_reason)
                )
            wait = None
        elif outcome == "completed":
            return _replayed(response.completed)
        elif outcome == "pending":
            pending = response.pending
            retry_after = seconds(pending.retry_after)
            remaining = end - clock()
            reason = pb.PendingReason.Name(pending.reason)
            if remaining <= PENDING_SLACK:
                raise PendingError(pending.operation_id, retry_after, reason)
            waited = clock() - sent_at
            if wait is not None and waited < min(PENDING_SLACK, wait):
                # The server did not wait (clamped): do not spin.
                yield Sleep(min(retry_after, remaining, NO_SPIN_PAUSE))
            wait = max(0.0, min(MAX_CLAIM_WAIT, remaining - PENDING_SLACK))
        elif outcome == "needs_reconciliation":
            needs = response.needs_reconciliation
            raise NeedsReconciliationError(needs.operation_id, needs.fence, needs.attempts)
        else:
            raise UnrecognisedOutcomeError(f"Claim answered {outcome!r}; nothing was executed")


class Lost(Exception):
    """Thrown into an attempt when its fence was refused (another owner took over)."""


class Stopped(Exception):
    """Thrown into an attempt when its time is up (the attempt deadline is near)."""


class Attempt:
    """One owned attempt: renews the lease, runs the effect within the deadline and
    the lease, records the outcome. Its state is shared with the renewals, which run
    alongside (an asyncio task, or a thread: each field is written whole)."""

    def __init__(
        self,
        ownership: pb.Ownership,
        claimed: tuple[float, float],
        lease: float,
        reconcile_first: pb.ReconcileFirst | None,
        has_lookup: bool,
        lookup_interval: float,
        *,
        provider_deduplicates: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock = clock
        self.operation_id = ownership.operation_id
        self.fence = ownership.fence
        self.attempt = ownership.attempt
        sent_at, received_at = claimed  # the start of the Claim's answered send, its reply
        self.lease = lease
        self.granted = seconds(ownership.lease)
        self.lease_expires_at = sent_at + self.granted
        self.deadline_at = sent_at + seconds(ownership.attempt_deadline)
        duration = seconds(ownership.attempt_deadline)
        #: Room left before the deadline to stop the effect and report it; the effect
        #: is not started with less than this of the attempt left (past cancel_at).
        self.margin = max(0.05, min(1.0, duration / 10))
        #: The effect is not started with less than this of the lease left, even after
        #: a Renew (at most a third of the lease asked for counts). Judged against the
        #: lease asked for, not the one granted: a re-sent Claim is granted only what
        #: was left of the lease by then, and half of a remnant is no margin.
        self.lease_margin = min(self.margin, self.lease / 3)
        #: Set just before the effect starts: until then nothing ran, and an attempt
        #: that cannot go on declines (Fail NOT_STARTED) instead of reporting UNKNOWN.
        self.started = False
        #: When run() answers None (claim again): when the next attempt is due, and
        #: why, should the caller's deadline pass first.
        self.reclaim_after = 0.0
        self.reclaim_reason: pb.PendingReason = pb.PENDING_REASON_RETRY_SCHEDULED
        self.cancel_at = self.deadline_at - self.margin
        self.has_lookup = has_lookup
        self.provider_deduplicates = provider_deduplicates
        self.lookup_interval = lookup_interval
        self.lost = False
        self.lost_error: StatusError | None = None
        #: The driver's hook, called once when the lease is lost (wakes the guard).
        self.notify_lost: Callable[[], None] = lambda: None
        #: Set by a driver whose guard saw the attempt's time run out.
        self.timed_out = False
        given: float | None = None
        settles_at: float | None = None
        if reconcile_first is not None:
            given, settles_at = previous_attempt_settles_at(reconcile_first, received_at)
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

    def interruption(self) -> Lost | Stopped | None:
        """Why the attempt must stop now, if it must."""
        if self.lost:
            if isinstance(self.lost_error, AttemptDeadlinePassedError):
                return Stopped()  # nobody took over: this attempt's time is up
            return Lost()
        if self.timed_out or self.clock() >= self.cancel_at:
            return Stopped()
        return None

    # ---- the lease ---------------------------------------------------------

    def renew(self) -> Steps[None]:
        """Renews once (re-sent after transient failures); a refusal marks it lost."""
        try:
            response, sent_at = yield Call(
                "send_renew",
                (self.operation_id, self.fence),
                {"lease": self.lease, "deadline": self.cancel_at},
            )
        except (LeaseLostError, AttemptDeadlinePassedError) as refusal:
            self.lost_error = refusal
            self.lost = True
            self.ctx.cancelled.set()
            self.notify_lost()
            return
        self.granted = seconds(response.lease)
        self.lease_expires_at = sent_at + self.granted
        self.deadline_at = min(self.deadline_at, sent_at + seconds(response.attempt_deadline))

    def keep_renewing(self) -> Steps[None]:
        # Once the lease reaches the attempt deadline, Renew cannot extend it further.
        while not self.lost and self.lease_expires_at < self.deadline_at - 0.001:
            due = self.lease_expires_at - self.granted * 2 / 3
            yield Sleep(max(0.0, due - self.clock()))
            try:
                yield from self.renew()
            except StateForbidsError:
                return  # marked UNKNOWN by a Claim: no renewals, writes still allowed
            except StatusError:
                # Transient failures outlasted the retry policy: try again shortly; the
                # lease may lapse, in which case a new owner reconciles first.
                yield Sleep(min(1.0, max(0.05, self.granted / 10)))

    # ---- the attempt -----------------------------------------------------------

    def run(self) -> Steps[Result | None]:
        """The attempt's answer, or None when a retry was scheduled or the attempt
        declined before the effect (claim again)."""
        yield StartRenewing(self)
        try:
            return (yield from self._run())
        except Lost:
            if not self.started:
                # Nothing ran here: another owner has the operation; claim again.
                self.reclaim_reason = pb.PENDING_REASON_IN_PROGRESS
                return None
            return (yield from self._answer_stored())
        except Stopped:
            if not self.started:
                return (yield from self.decline())
            yield from self.fail_unknown(*ATTEMPT_DEADLINE_REPORT)
            raise AttemptTimeoutError(
                self.operation_id, "the effect was cancelled at the attempt deadline; its outcome is unknown"
            ) from None
        finally:
            yield StopRenewing(self)

    def _run(self) -> Steps[Result | None]:
        if self.ctx.previous_outcome_unknown:
            if self.has_lookup:
                found = yield from self._look_up_provider()
                if found is not None:
                    return (yield from self._record(found))
            elif not self.provider_deduplicates:
                # Running the effect again could repeat the earlier one, and nothing
                # here can tell whether it happened. NOT_STARTED hands the doubt on
                # with the earlier attempt's deadline, for a caller (or reconciler)
                # that can check.
                yield from self._send_decline()
                raise OutcomeUnknownError(self.operation_id, CANNOT_CHECK_EARLIER_ATTEMPT)
        # Never start the effect so close to the attempt deadline that it would be
        # cancelled as soon as it started (checked before renewing too: a Renew bounded
        # by a deadline that is all but gone fails as DEADLINE_EXCEEDED, e.g. after a
        # lookup that waited for the earlier attempt), nor on a lease that may be
        # running out. The lease counts from the Claim's answered send, which a
        # long-polled Claim (or the wait for an earlier attempt) may have left far
        # behind, and a re-sent Claim is answered with what was left of it by then:
        # renew it once, counted from the Renew's answered send, and decline only if
        # too little is left even then.
        if self.cancel_at - self.clock() < self.margin:
            return (yield from self.decline())
        if self.lease_expires_at - self.clock() < self.lease / 2:
            try:
                yield from self.renew()
            except StatusError as error:
                # Transient failures outlasted the re-sends, or STATE_FORBIDS (the lease
                # ran out and a Claim marked the attempt): the re-check below decides.
                if not (is_retryable(error) or isinstance(error, StateForbidsError)):
                    raise
            if self.lost and (interrupted := self.interruption()) is not None:
                raise interrupted  # LEASE_LOST: claim again; ATTEMPT_DEADLINE_PASSED: decline
            now = self.clock()
            if self.lease_expires_at - now < self.lease_margin or self.cancel_at - now < self.margin:
                return (yield from self.decline())
        self.started = True
        try:
            outcome = yield Guarded(self, "effect")
        except (Lost, Stopped):
            raise
        except Exception as error:  # the effect failed in a way nobody can tell
            yield from self.fail_unknown("effect_raised", type(error).__name__)
            raise OutcomeUnknownError(
                self.operation_id, f"the effect raised {type(error).__name__}; its outcome is unknown"
            ) from error
        return (yield from self._record(outcome))

    def _look_up_provider(self) -> Steps[Success | Terminal | None]:
        while True:
            # Taken before the lookup starts: it may read the provider at any moment
            # up to its answer, so only its start is known to precede the read.
            started_at = self.clock()
            try:
                found = yield Guarded(self, "lookup")
            except (Lost, Stopped):
                raise
            except Exception as error:
                # Nothing ran here: hand the doubt on as it is (NOT_STARTED keeps the
                # earlier attempt's deadline), but this call cannot tell the outcome.
                yield from self._send_decline()
                raise OutcomeUnknownError(
                    self.operation_id, "the provider lookup failed; the earlier attempt's outcome is unknown"
                ) from error
            if found is not None or self.ctx.previous_attempt_settled(started_at):
                return found  # type: ignore[no-any-return]
            # Nothing found proves nothing if the lookup began while the earlier
            # attempt could still run (even when it answered after that): its read
            # may precede an effect that landed before the earlier deadline.
            settles_at = self.ctx.previous_attempt_settles_at or 0.0
            now = self.clock()
            if settles_at >= self.cancel_at and now + self.lookup_interval >= self.cancel_at:
                # This attempt ends before the doubt does (its Claim took long enough,
                # re-sent or long-polled, to eat the gap between the two deadlines):
                # having looked until now, hand the doubt on as it is; the next
                # attempt, told the earlier deadline and ending later, waits it out.
                raise Stopped()
            yield Guarded(self, "sleep", max(0.0, min(self.lookup_interval, settles_at - now)))

    def _record(self, outcome: Outcome) -> Steps[Result | None]:
        try:
            if isinstance(outcome, Success):
                yield Call(
                    "complete",
                    (self.operation_id, self.fence, outcome.body),
                    {
                        "content_type": outcome.content_type,
                        "metadata": outcome.metadata,
                        "deadline": self.deadline_at,
                    },
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
                yield self._fail(pb.FAIL_DISPOSITION_TERMINAL, outcome.code, outcome.message, outcome.metadata)
                raise self._failed(pb.FAILURE_REASON_TERMINAL, outcome)
            if isinstance(outcome, Retryable):
                failed = yield self._fail(
                    pb.FAIL_DISPOSITION_RETRYABLE,
                    outcome.code,
                    outcome.message,
                    outcome.metadata,
                    retry_after=outcome.retry_after,
                )
                if failed.state == pb.OPERATION_STATE_RETRY_WAIT:
                    self.reclaim_after = seconds(failed.retry_after)
                    return None
                raise self._failed(failed.reason, outcome)
            if isinstance(outcome, Unknown):
                yield from self.fail_unknown(outcome.code, outcome.message)
                raise OutcomeUnknownError(self.operation_id, "the effect's outcome is unknown")
            raise TypeError(f"an effect returns Success, Terminal, Retryable or Unknown, not {outcome!r}")
        except LeaseLostError:
            return (yield from self._answer_stored())
        except AttemptDeadlinePassedError:
            raise OutcomeUnknownError(
                self.operation_id,
                "the attempt deadline passed before the outcome was recorded; a reconciler must settle it",
            ) from None

    def _failed(self, reason: pb.FailureReason, outcome: Terminal | Retryable) -> OperationFailedError:
        """The error this call raises for an outcome it recorded as the operation's failure."""
        return OperationFailedError(
            self.operation_id,
            pb.OperationError(reason=reason, code=outcome.code, message=outcome.message, metadata=outcome.metadata),
            replayed=False,
        )

    def _fail(
        self,
        disposition: pb.FailDisposition,
        code: str,
        message: str,
        metadata: Mapping[str, str] | None = None,
        retry_after: float | None = None,
    ) -> Call:
        return Call(
            "fail",
            (self.operation_id, self.fence, disposition),
            {
                "code": code,
                "message": message,
                "metadata": metadata,
                "retry_after": retry_after,
                "deadline": self.deadline_at,
            },
        )

    def fail_unknown(self, code: str, message: str) -> Steps[None]:
        """Best effort: an attempt whose outcome is unknown says so; if it cannot, its
        lease runs out and the next owner reconciles first all the same."""
        with contextlib.suppress(IdemError):
            yield self._fail(pb.FAIL_DISPOSITION_UNKNOWN, code, message)

    def report_time_up(self) -> Steps[None]:
        """The blocking client's watchdog, at the attempt's cancel point: UNKNOWN once
        the effect started, NOT_STARTED before (during a lookup), best effort. The
        protocol sends the same request again afterwards, answered from this one's
        receipt."""
        if self.started:
            yield from self.fail_unknown(*ATTEMPT_DEADLINE_REPORT)
        else:
            yield from self._send_decline()

    def _decline_call(self) -> Call:
        # No retry_after: with NOT_STARTED it is INVALID_ARGUMENT.
        return self._fail(pb.FAIL_DISPOSITION_NOT_STARTED, *NOT_STARTED_REPORT)

    def _send_decline(self) -> Steps[None]:
        """Best effort Fail NOT_STARTED (the lease runs out otherwise, and the next
        owner reconciles first all the same)."""
        with contextlib.suppress(IdemError):
            yield self._decline_call()

    def decline(self) -> Steps[Result | None]:
        """The effect is not started: Fail NOT_STARTED, which hands the operation on as
        it was before this attempt (released for the next attempt at once, or, after a
        takeover, still in the doubt it took over, ending with that attempt's
        deadline, never this one's). None: claim again. FAILED (the attempt budget or
        the operation deadline is spent): answered with what is stored."""
        try:
            failed = yield self._decline_call()
        except (LeaseLostError, AttemptDeadlinePassedError):
            # Taken over meanwhile, or too late to say so (the next owner is handed a
            # takeover of this attempt either way): nothing ran here; claim again.
            return None
        except StatusError as error:
            if not is_retryable(error):
                raise
            # Not answered in time (the blocking client's watchdog may have said it
            # already): nothing ran here, and the next Claim learns where it stands.
            return None
        if failed.state == pb.OPERATION_STATE_FAILED:
            return (yield from self._answer_stored())
        self.reclaim_after = seconds(failed.retry_after)
        return None

    def _answer_stored(self) -> Steps[Result]:
        """LEASE_LOST (or a decline that ended the operation): answer with what is
        stored; never redo the effect."""
        found = yield Call("lookup", (), {"operation_id": self.operation_id})
        operation = found.operation
        if operation.state == pb.OPERATION_STATE_SUCCEEDED:
            return _stored(operation.operation_id, operation.result, operation.attempt)
        if operation.state == pb.OPERATION_STATE_FAILED:
            raise OperationFailedError(operation.operation_id, operation.error, replayed=True)
        raise SupersededError(operation)
