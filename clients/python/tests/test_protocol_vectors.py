"""The shared protocol vectors (../../testdata/protocol/vectors.json, described in its
README) driving this client's protocol core, :mod:`idemd.protocol`, without a server.

The world of a scenario is scripted: each step the protocol takes (a send, the effect,
a provider lookup) must be the vector's next step, and is answered as the vector says,
the clock moving only by what the vector says each step takes. Sends go through the
client's own re-send decisions (:class:`idemd.retry.RetryPlan`, with no jitter), so a
scripted UNAVAILABLE is re-sent the way the client re-sends it. Background renewals run
while a guarded step (the effect, a provider lookup, a pause between lookups) takes its
time, starting with the attempt's first guarded step.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2

from idemd.errors import (
    AttemptTimeoutError,
    NeedsReconciliationError,
    OperationFailedError,
    OutcomeUnknownError,
    PendingError,
    StatusError,
    SupersededError,
    UnrecognisedOutcomeError,
)
from idemd.proto import error_details_pb2, pack_detail, pb, status_pb2
from idemd.protocol import (
    Attempt,
    Call,
    Guarded,
    Retryable,
    Sleep,
    StartRenewing,
    Step,
    StopRenewing,
    Success,
    Terminal,
    Unknown,
    execute_once_steps,
    run_steps,
)
from idemd.retry import DEFAULT_RETRY, RetryPlan
from idemd.wire import seconds

VECTORS = Path(__file__).resolve().parents[3] / "testdata" / "protocol" / "vectors.json"
SCENARIOS = json.loads(VECTORS.read_text())["scenarios"]

#: The monotonic clock at the call's start; the vectors count from 0.
ORIGIN = 1000.0
#: Times in the vectors are multiples of 1/64 s; computed ones (a wait less the slack)
#: are compared within this.
TOLERANCE = 1e-6

CALL_DEFAULTS: dict[str, Any] = {
    "lease": 30.0,
    "attempt_duration": 300.0,
    "deadline": 60.0,
    "lookup": False,
    "provider_deduplicates": False,
    "lookup_interval": 1.0,
}

# The scripted errors: (gRPC code, ErrorInfo reason).
ERRORS: dict[str, tuple[grpc.StatusCode, str | None]] = {
    "UNAVAILABLE": (grpc.StatusCode.UNAVAILABLE, None),
    "LOST_REPLY": (grpc.StatusCode.DEADLINE_EXCEEDED, None),
    "LEASE_LOST": (grpc.StatusCode.ABORTED, "LEASE_LOST"),
    "ATTEMPT_DEADLINE_PASSED": (grpc.StatusCode.FAILED_PRECONDITION, "ATTEMPT_DEADLINE_PASSED"),
    "STATE_FORBIDS": (grpc.StatusCode.FAILED_PRECONDITION, "STATE_FORBIDS"),
    "IDEMPOTENCY_KEY_REUSED": (grpc.StatusCode.FAILED_PRECONDITION, "IDEMPOTENCY_KEY_REUSED"),
    "RESULT_EXPIRED": (grpc.StatusCode.FAILED_PRECONDITION, "RESULT_EXPIRED"),
    "INVALID_REQUEST": (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST"),
}


class ScriptedRpcError(grpc.RpcError):
    """A failed send as gRPC reports it: code, message and the status details trailer."""

    def __init__(self, name: str, retry_after: float | None) -> None:
        super().__init__(name)
        self._code, reason = ERRORS[name]
        status = status_pb2.Status(code=self._code.value[0], message=f"scripted {name}")
        if reason is not None:
            status.details.append(pack_detail(error_details_pb2.ErrorInfo(reason=reason, domain="idem.v1")))
        if retry_after is not None:
            delay = duration_pb2.Duration()
            delay.FromNanoseconds(round(retry_after * 1e9))
            status.details.append(pack_detail(error_details_pb2.RetryInfo(retry_delay=delay)))
        self._details = status.SerializeToString()

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return "scripted"

    def trailing_metadata(self) -> tuple[tuple[str, bytes], ...]:
        return (("grpc-status-details-bin", self._details),)


def duration(value: float) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromNanoseconds(round(value * 1e9))
    return d


def ownership(fields: dict[str, Any]) -> pb.Ownership:
    attempt = fields["attempt"]
    return pb.Ownership(
        operation_id="op-1",
        fence=10 + attempt,
        attempt=attempt,
        max_attempts=5,
        lease=duration(fields["lease"]),
        attempt_deadline=duration(fields["attempt_deadline"]),
    )


def claim_response(answer: dict[str, Any]) -> pb.ClaimResponse:
    (kind, fields), = answer.items()
    if kind == "acquired":
        return pb.ClaimResponse(acquired=pb.Acquired(ownership=ownership(fields)))
    if kind == "reconcile_first":
        first = pb.ReconcileFirst(
            ownership=ownership(fields),
            previous_state=pb.OPERATION_STATE_IN_PROGRESS,
            previous_fence=9 + fields["attempt"],
        )
        if "previous_attempt_deadline" in fields:
            first.previous_attempt_deadline.CopyFrom(duration(fields["previous_attempt_deadline"]))
        return pb.ClaimResponse(reconcile_first=first)
    if kind == "completed":
        completed = pb.Completed(operation_id="op-1", attempts=fields["attempts"])
        if "error" in fields:
            completed.state = pb.OPERATION_STATE_FAILED
            completed.error.CopyFrom(pb.OperationError(reason=pb.FAILURE_REASON_TERMINAL, code=fields["error"]))
        else:
            completed.state = pb.OPERATION_STATE_SUCCEEDED
            completed.result.CopyFrom(pb.Result(body=fields["body"].encode()))
        return pb.ClaimResponse(completed=completed)
    if kind == "pending":
        return pb.ClaimResponse(
            pending=pb.Pending(
                operation_id="op-1",
                reason=pb.PendingReason.Value("PENDING_REASON_" + fields["reason"]),
                retry_after=duration(fields["retry_after"]),
                attempt=1,
            )
        )
    if kind == "needs_reconciliation":
        return pb.ClaimResponse(
            needs_reconciliation=pb.NeedsReconciliation(operation_id="op-1", fence=14, attempts=fields["attempts"])
        )
    assert kind == "unrecognised", kind
    return pb.ClaimResponse()  # an outcome added later decodes as none


def fail_response(answer: dict[str, Any]) -> pb.FailResponse:
    response = pb.FailResponse(state=pb.OperationState.Value("OPERATION_STATE_" + answer["state"]))
    if "reason" in answer:
        response.reason = pb.FailureReason.Value("FAILURE_REASON_" + answer["reason"])
    if "retry_after" in answer:
        response.retry_after.CopyFrom(duration(answer["retry_after"]))
    return response


def lookup_response(answer: dict[str, Any]) -> pb.LookupResponse:
    operation = pb.Operation(
        operation_id="op-1",
        state=pb.OperationState.Value("OPERATION_STATE_" + answer["state"]),
        attempt=answer["attempt"],
    )
    if "body" in answer:
        operation.result.CopyFrom(pb.Result(body=answer["body"].encode()))
    if "error" in answer:
        operation.error.CopyFrom(
            pb.OperationError(reason=pb.FailureReason.Value("FAILURE_REASON_" + answer["reason"]), code=answer["error"])
        )
    return pb.LookupResponse(operation=operation)


def outcome(returns: dict[str, Any] | None) -> Success | Terminal | Retryable | Unknown | None:
    if returns is None:
        return None
    if "success" in returns:
        return Success(body=returns["success"].encode())
    if "terminal" in returns:
        return Terminal(code=returns["terminal"])
    if "retryable" in returns:
        return Retryable(code=returns["retryable"], retry_after=returns["retry_after"])
    return Unknown(code=returns["unknown"])


class World:
    """The scripted server, provider and clock of one scenario."""

    def __init__(self, scenario: dict[str, Any]) -> None:
        self.name = scenario["name"]
        self.call = {**CALL_DEFAULTS, **scenario.get("call", {})}
        self.steps: list[dict[str, Any]] = list(scenario["steps"])
        self.taken = 0
        self.now = ORIGIN
        self.tokens: list[bytes] = []
        self.first_sends: dict[int, bytes] = {}
        self.attempt: Attempt | None = None
        # The attempt's background renewals, started at its first guarded step: the
        # generator and when its current pause ends (None: not started, or finished).
        self.renewals: Generator[Step, Any, None] | None = None
        self.renewals_started = False
        self.renewal_wakes_at: float | None = None
        self.failure: AssertionError | None = None

    # ---- the clock and the claim tokens ----------------------------------------

    def clock(self) -> float:
        return self.now

    def new_claim_token(self) -> bytes:
        self.tokens.append(b"claim-token-%04d" % (len(self.tokens) + 1))
        return self.tokens[-1]

    # ---- the script --------------------------------------------------------------

    def where(self) -> str:
        return f"{self.name!r}, step {self.taken + 1}"

    def expect(self, do: str) -> dict[str, Any]:
        """The vector's next step, which must be ``do``, taken now."""
        assert self.steps and "do" in self.steps[0], (
            f"{self.where()}: the client does {do!r}, the vector expects {self.steps[0] if self.steps else 'nothing'}"
        )
        step = self.steps[0]
        assert step["do"] == do, f"{self.where()}: the client does {do!r}, the vector expects {step}"
        if "at" in step:
            assert abs(self.now - ORIGIN - step["at"]) < TOLERANCE, (
                f"{self.where()}: {do} at {self.now - ORIGIN:.6f} s, the vector says {step['at']} s"
            )
        self.steps.pop(0)
        self.taken += 1
        return step

    def send(self, do: str, deadline: float | None, check: Any) -> tuple[dict[str, Any], float]:
        """One call, re-sent as the client's RetryPlan decides: each send is the
        vector's next step; returns the answer and when the answered send began."""
        plan = RetryPlan(DEFAULT_RETRY, deadline=deadline, clock=self.clock, uniform=lambda low, _high: low)
        while True:
            plan.next_timeout()  # raises DEADLINE_EXCEEDED when no time is left to send
            step = self.expect(do)
            check(step)
            self.now += step.get("takes", 0)
            if "error" in step:
                self.now += plan.delay_after(ScriptedRpcError(step["error"], step.get("retry_after")))
                continue
            return step["answer"], plan.sent_at

    # ---- the steps the protocol asks for -------------------------------------------

    def perform(self, step: Step) -> Any:
        try:
            return self.perform_step(step)
        except AssertionError as failure:
            # The protocol may catch what a step raises (an effect that raised is its
            # outcome): the first departure from the script is kept and reported.
            self.failure = self.failure or failure
            raise

    def perform_step(self, step: Step) -> Any:
        if isinstance(step, Call):
            return getattr(self, step.method)(*step.args, **step.kwargs)
        if isinstance(step, Sleep):
            self.now += step.seconds
            return None
        if isinstance(step, Guarded):
            return self.guarded(step)
        if isinstance(step, StartRenewing):
            self.attempt = step.attempt
            self.renewals = step.attempt.keep_renewing()
            self.renewals_started = False
            self.renewal_wakes_at = None
            return None
        if isinstance(step, StopRenewing):
            if self.renewals is not None:
                self.renewals.close()
            self.renewals = None
            return None
        raise AssertionError(f"not a protocol step: {step!r}")

    def send_claim(self, request: pb.ClaimRequest, *, deadline: float) -> tuple[pb.ClaimResponse, float]:
        def check(step: dict[str, Any]) -> None:
            number = self.tokens.index(request.claim_token) + 1
            assert step["token"] == number, (
                f"{self.where()}: Claim with token {number}, the vector says {step['token']}"
            )
            sent = request.SerializeToString(deterministic=True)
            # A re-send is the whole Claim unchanged; a new token is a new Claim.
            assert self.first_sends.setdefault(number, sent) == sent, f"{self.where()}: a re-sent Claim changed"
            if "wait" in step:
                assert request.HasField("wait"), f"{self.where()}: a Claim without wait, the vector says {step['wait']}"
                assert abs(seconds(request.wait) - step["wait"]) < TOLERANCE, (
                    f"{self.where()}: wait {seconds(request.wait)}, the vector says {step['wait']}"
                )
            else:
                assert not request.HasField("wait"), f"{self.where()}: a Claim with wait {seconds(request.wait)}"
            assert seconds(request.lease) == self.call["lease"]
            assert seconds(request.max_attempt_duration) == self.call["attempt_duration"]

        answer, sent_at = self.send("claim", deadline, check)
        return claim_response(answer), sent_at

    def send_renew(
        self, operation_id: str, fence: int, *, lease: float, deadline: float
    ) -> tuple[pb.RenewResponse, float]:
        def check(step: dict[str, Any]) -> None:
            assert self.attempt is not None and fence == self.attempt.fence, f"{self.where()}: Renew with fence {fence}"
            assert lease == self.call["lease"], f"{self.where()}: Renew asks for {lease}, not the lease asked for"

        answer, sent_at = self.send("renew", deadline, check)
        renewed = pb.RenewResponse(
            lease=duration(answer["lease"]), attempt_deadline=duration(answer["attempt_deadline"])
        )
        return renewed, sent_at

    def complete(self, operation_id: str, fence: int, body: bytes, **kwargs: Any) -> pb.CompleteResponse:
        def check(step: dict[str, Any]) -> None:
            assert body == step["body"].encode(), f"{self.where()}: Complete with {body!r}"

        self.send("complete", kwargs.get("deadline"), check)
        return pb.CompleteResponse(state=pb.OPERATION_STATE_SUCCEEDED)

    def fail(self, operation_id: str, fence: int, disposition: int, **kwargs: Any) -> pb.FailResponse:
        name = pb.FailDisposition.Name(disposition).removeprefix("FAIL_DISPOSITION_")

        def check(step: dict[str, Any]) -> None:
            assert step["disposition"] == name, f"{self.where()}: Fail {name}, the vector says {step['disposition']}"
            if "code" in step:
                assert kwargs["code"] == step["code"], f"{self.where()}: Fail with code {kwargs['code']!r}"
            assert kwargs.get("retry_after") == step.get("retry_after"), (
                f"{self.where()}: Fail with retry_after {kwargs.get('retry_after')}"
            )

        answer, _ = self.send("fail", kwargs.get("deadline"), check)
        return fail_response(answer)

    def lookup(self, *, operation_id: str, deadline: float | None = None) -> pb.LookupResponse:
        answer, _ = self.send("lookup", deadline, lambda step: None)
        return lookup_response(answer)

    # ---- guarded work and the renewals beside it -----------------------------------

    def renewals_wake_at(self) -> float | None:
        if self.renewals is not None and not self.renewals_started:
            self.renewals_started = True
            self.advance_renewals(None, None)
        return self.renewal_wakes_at

    def advance_renewals(self, answer: Any, error: BaseException | None) -> None:
        """Runs the renewals up to their next pause (performing their sends)."""
        assert self.renewals is not None
        while True:
            try:
                step = self.renewals.throw(error) if error is not None else self.renewals.send(answer)
            except StopIteration:
                self.renewal_wakes_at = None
                return
            if isinstance(step, Sleep):
                self.renewal_wakes_at = self.now + step.seconds
                return
            answer, error = None, None
            try:
                answer = self.perform(step)
            except StatusError as raised:
                error = raised

    def guarded(self, step: Guarded) -> Any:
        attempt = step.attempt
        if step.what == "effect":
            script = self.expect("effect")
            if "previous_outcome_unknown" in script:
                assert attempt.ctx.previous_outcome_unknown == script["previous_outcome_unknown"]
            takes = script.get("takes", 0)
        elif step.what == "lookup":
            script = self.expect("provider_lookup")
            takes = script.get("takes", 0)
        else:
            script, takes = {}, step.seconds
        ends_at = self.now + takes
        while True:
            wakes_at = self.renewals_wake_at()
            stop_at = min(ends_at, attempt.cancel_at)
            if wakes_at is not None and wakes_at < stop_at:
                self.now = max(self.now, wakes_at)
                self.renewal_wakes_at = None
                self.advance_renewals(None, None)
                if attempt.lost:
                    raise attempt.interruption() or AssertionError("lost without an interruption")
                continue
            if ends_at > attempt.cancel_at:
                self.now = max(self.now, attempt.cancel_at)
                attempt.timed_out = True
                raise attempt.interruption() or AssertionError("time up without an interruption")
            self.now = ends_at
            break
        if script.get("raises"):
            raise RuntimeError("the scripted effect or lookup raised")
        return outcome(script.get("returns")) if script else None

    # ---- the call ----------------------------------------------------------------

    def run(self) -> tuple[Any, BaseException | None]:
        steps = execute_once_steps(
            "payments.charge",
            "order-1",
            '{"amount":1000,"currency":"EUR"}',
            has_lookup=self.call["lookup"],
            provider_deduplicates=self.call["provider_deduplicates"],
            lease=self.call["lease"],
            attempt_duration=self.call["attempt_duration"],
            deadline=self.call["deadline"],
            fingerprint=None,
            max_attempts=0,
            retention=None,
            operation_deadline=None,
            lookup_interval=self.call["lookup_interval"],
            clock=self.clock,
            new_claim_token=self.new_claim_token,
        )
        try:
            return run_steps(steps, self.perform), None
        except Exception as error:  # the call's error is what the vector checks
            return None, error


def error_kind(error: BaseException) -> str:
    kinds: list[tuple[type[BaseException], str]] = [
        (AttemptTimeoutError, "ATTEMPT_TIMEOUT"),
        (OutcomeUnknownError, "OUTCOME_UNKNOWN"),
        (OperationFailedError, "OPERATION_FAILED"),
        (PendingError, "PENDING"),
        (NeedsReconciliationError, "NEEDS_RECONCILIATION"),
        (SupersededError, "SUPERSEDED"),
        (UnrecognisedOutcomeError, "UNRECOGNISED_OUTCOME"),
        (StatusError, "STATUS"),
    ]
    for cls, kind in kinds:
        if isinstance(error, cls):
            return kind
    raise error


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_protocol_vector(scenario: dict[str, Any]) -> None:
    world = World(scenario)
    result, error = world.run()
    if world.failure is not None:
        raise world.failure
    assert len(world.steps) == 1, (
        f"{world.where()}: the call ended ({result or error!r}) before the vector's step {world.steps[0]}"
    )
    final = world.steps[0]
    if "result" in final:
        assert error is None, f"{world.name!r}: raised {error!r}, the vector expects a result"
        expected = final["result"]
        assert (result.body, result.replayed, result.attempts) == (
            expected["body"].encode(),
            expected["replayed"],
            expected["attempts"],
        ), f"{world.name!r}: {result}"
        return
    expected = final["raises"]
    assert error is not None, f"{world.name!r}: returned {result}, the vector expects {expected}"
    assert error_kind(error) == expected["kind"], f"{world.name!r}: raised {error!r}, the vector expects {expected}"
    if isinstance(error, OperationFailedError):
        assert (error.reason.removeprefix("FAILURE_REASON_"), error.replayed) == (
            expected["reason"],
            expected["replayed"],
        ), f"{world.name!r}: {error!r}"
    if isinstance(error, StatusError):
        if "reason" in expected:
            assert error.reason == expected["reason"], f"{world.name!r}: {error!r}"
        if "code" in expected:
            assert error.code.name == expected["code"], f"{world.name!r}: {error!r}"


def test_every_scenario_has_a_distinct_name() -> None:
    names = [s["name"] for s in SCENARIOS]
    assert len(names) == len(set(names))
