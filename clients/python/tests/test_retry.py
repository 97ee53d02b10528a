"""Item: the retry taxonomy, in one place (idemd.retry)."""

from __future__ import annotations

from collections.abc import Callable

import grpc
import pytest
from google.protobuf import duration_pb2

import idemd
from idemd import errors
from idemd.proto import error_details_pb2, pack_detail, status_pb2
from idemd.retry import (
    NEVER_RETRIED_CODES,
    RETRIED_CODES,
    call_with_retry,
    call_with_retry_answered,
    call_with_retry_answered_sync,
    call_with_retry_sync,
)


class FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, reason: str | None = None, retry_after: float | None = None) -> None:
        self._code = code
        status = status_pb2.Status(code=code.value[0])
        for detail in (
            [error_details_pb2.ErrorInfo(reason=reason, domain="idem.v1")] if reason else []
        ) + (
            [error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(nanos=int(retry_after * 1e9)))]
            if retry_after is not None else []
        ):
            status.details.append(pack_detail(detail))
        self._trailers = (("grpc-status-details-bin", status.SerializeToString()),)

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return "fake"

    def trailing_metadata(self) -> tuple[tuple[str, bytes], ...]:
        return self._trailers


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        self.sleeps.append(delay)
        self.now += delay


def sync_script(*failures: grpc.RpcError) -> tuple[list[float], Callable[[float], str]]:
    """A blocking send that raises ``failures`` in turn, then answers "ok"; and the
    timeouts it was given."""
    timeouts: list[float] = []
    queue = list(failures)

    def send(timeout: float) -> str:
        timeouts.append(timeout)
        if queue:
            raise queue.pop(0)
        return "ok"

    return timeouts, send


def script(*failures: grpc.RpcError) -> tuple[list[float], object]:
    """:func:`sync_script` as an asyncio send."""
    timeouts, send_sync = sync_script(*failures)

    async def send(timeout: float) -> str:
        return send_sync(timeout)

    return timeouts, send


@pytest.mark.parametrize("code", sorted(RETRIED_CODES, key=str))
async def test_transient_codes_are_re_sent_with_full_jitter(code: grpc.StatusCode) -> None:
    clock = Clock()
    draws: list[tuple[float, float]] = []

    def uniform(low: float, high: float) -> float:
        draws.append((low, high))
        return high  # the top of the jitter range

    timeouts, send = script(FakeRpcError(code), FakeRpcError(code), FakeRpcError(code))
    policy = idemd.RetryPolicy(initial_backoff=0.1, multiplier=2, max_backoff=0.25, call_timeout=3)
    assert await call_with_retry(send, policy, sleep=clock.sleep, uniform=uniform, clock=clock) == "ok"  # type: ignore[arg-type]
    assert len(timeouts) == 4
    # Full jitter: uniform(0, cap), the cap growing exponentially up to max_backoff.
    assert draws == [(0.0, 0.1), (0.0, 0.2), (0.0, 0.25)]
    assert clock.sleeps == [0.1, 0.2, 0.25]


async def test_retry_info_sets_the_least_delay() -> None:
    clock = Clock()
    _, send = script(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE", retry_after=0.7))
    await call_with_retry(send, idemd.RetryPolicy(), sleep=clock.sleep, uniform=lambda a, b: 0.0, clock=clock)  # type: ignore[arg-type]
    assert clock.sleeps == [pytest.approx(0.7)]


@pytest.mark.parametrize("code", sorted(NEVER_RETRIED_CODES, key=str))
async def test_refusals_are_never_re_sent(code: grpc.StatusCode) -> None:
    clock = Clock()
    timeouts, send = script(FakeRpcError(code, "SOMETHING"))
    with pytest.raises(errors.StatusError) as raised:
        await call_with_retry(send, idemd.RetryPolicy(), sleep=clock.sleep, clock=clock)  # type: ignore[arg-type]
    assert raised.value.code == code
    assert len(timeouts) == 1 and clock.sleeps == []


async def test_a_request_too_large_is_never_re_sent_but_a_shed_call_is() -> None:
    clock = Clock()
    timeouts, send = script(FakeRpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, "REQUEST_TOO_LARGE"))
    with pytest.raises(errors.RequestTooLargeError):
        await call_with_retry(send, idemd.RetryPolicy(), sleep=clock.sleep, clock=clock)  # type: ignore[arg-type]
    assert len(timeouts) == 1
    timeouts, send = script(
        FakeRpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, "TENANT_CONCURRENCY_LIMIT", retry_after=0.1),
        FakeRpcError(grpc.StatusCode.UNAVAILABLE, "OVERLOADED", retry_after=0.1),
    )
    assert await call_with_retry(send, idemd.RetryPolicy(), sleep=clock.sleep, clock=clock) == "ok"  # type: ignore[arg-type]
    assert len(timeouts) == 3


async def test_idemd_internal_is_not_re_sent_but_a_broken_transport_is() -> None:
    clock = Clock()
    timeouts, send = script(FakeRpcError(grpc.StatusCode.INTERNAL, "INTERNAL"))
    with pytest.raises(errors.InternalError):
        await call_with_retry(send, idemd.RetryPolicy(), sleep=clock.sleep, clock=clock)  # type: ignore[arg-type]
    assert len(timeouts) == 1
    timeouts, send = script(FakeRpcError(grpc.StatusCode.INTERNAL), FakeRpcError(grpc.StatusCode.UNKNOWN))
    assert await call_with_retry(send, idemd.RetryPolicy(), sleep=clock.sleep, clock=clock) == "ok"  # type: ignore[arg-type]
    assert len(timeouts) == 3


async def test_the_attempt_count_bounds_re_sends() -> None:
    clock = Clock()
    timeouts, send = script(*[FakeRpcError(grpc.StatusCode.UNAVAILABLE)] * 10)
    with pytest.raises(idemd.UnavailableError):
        await call_with_retry(send, idemd.RetryPolicy(max_sends=3), sleep=clock.sleep, clock=clock)  # type: ignore[arg-type]
    assert len(timeouts) == 3


async def test_the_total_deadline_bounds_re_sends_and_each_call() -> None:
    clock = Clock()
    timeouts, send = script(*[FakeRpcError(grpc.StatusCode.UNAVAILABLE, retry_after=0.4)] * 10)
    policy = idemd.RetryPolicy(max_sends=100, total_timeout=1.0, call_timeout=5.0)
    with pytest.raises(idemd.UnavailableError):
        await call_with_retry(send, policy, sleep=clock.sleep, clock=clock)  # type: ignore[arg-type]
    # Sends at 0, 0.4, 0.8; the next would start after the deadline.
    assert len(timeouts) == 3
    assert timeouts[0] == 1.0 and timeouts[1] == pytest.approx(0.6) and timeouts[2] == pytest.approx(0.2)
    timeouts, send = script()
    await call_with_retry(send, policy, deadline=0.5, sleep=clock.sleep, clock=lambda: 0.0)  # type: ignore[arg-type]
    assert timeouts == [0.5]


# ---- the blocking loop makes the same decisions (one RetryPlan) ----------------------


class SyncClock(Clock):
    def sleep_sync(self, delay: float) -> None:
        self.sleeps.append(delay)
        self.now += delay


@pytest.mark.parametrize("code", sorted(RETRIED_CODES, key=str))
def test_sync_transient_codes_are_re_sent_with_full_jitter(code: grpc.StatusCode) -> None:
    clock = SyncClock()
    draws: list[tuple[float, float]] = []

    def uniform(low: float, high: float) -> float:
        draws.append((low, high))
        return high

    timeouts, send = sync_script(FakeRpcError(code), FakeRpcError(code), FakeRpcError(code))
    policy = idemd.RetryPolicy(initial_backoff=0.1, multiplier=2, max_backoff=0.25, call_timeout=3)
    assert call_with_retry_sync(send, policy, sleep=clock.sleep_sync, uniform=uniform, clock=clock) == "ok"  # type: ignore[arg-type]
    assert len(timeouts) == 4 and draws == [(0.0, 0.1), (0.0, 0.2), (0.0, 0.25)]
    assert clock.sleeps == [0.1, 0.2, 0.25]


@pytest.mark.parametrize("code", sorted(NEVER_RETRIED_CODES, key=str))
def test_sync_refusals_are_never_re_sent(code: grpc.StatusCode) -> None:
    clock = SyncClock()
    timeouts, send = sync_script(FakeRpcError(code, "SOMETHING"))
    with pytest.raises(errors.StatusError) as raised:
        call_with_retry_sync(send, idemd.RetryPolicy(), sleep=clock.sleep_sync, clock=clock)  # type: ignore[arg-type]
    assert raised.value.code == code and len(timeouts) == 1 and clock.sleeps == []


def test_sync_retry_info_too_large_and_the_deadlines() -> None:
    clock = SyncClock()
    _, send = sync_script(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE", retry_after=0.7))
    call_with_retry_sync(send, idemd.RetryPolicy(), sleep=clock.sleep_sync, uniform=lambda a, b: 0.0, clock=clock)  # type: ignore[arg-type]
    assert clock.sleeps == [pytest.approx(0.7)]
    timeouts, send = sync_script(FakeRpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, "REQUEST_TOO_LARGE"))
    with pytest.raises(errors.RequestTooLargeError):
        call_with_retry_sync(send, idemd.RetryPolicy(), sleep=clock.sleep_sync, clock=clock)  # type: ignore[arg-type]
    assert len(timeouts) == 1
    timeouts, send = sync_script(*[FakeRpcError(grpc.StatusCode.UNAVAILABLE, retry_after=0.4)] * 10)
    policy = idemd.RetryPolicy(max_sends=100, total_timeout=1.0, call_timeout=5.0)
    with pytest.raises(idemd.UnavailableError):
        call_with_retry_sync(send, policy, sleep=clock.sleep_sync, clock=clock)  # type: ignore[arg-type]
    assert timeouts == [1.0, pytest.approx(0.6), pytest.approx(0.2)]
    timeouts, send = sync_script(*[FakeRpcError(grpc.StatusCode.UNAVAILABLE)] * 10)
    with pytest.raises(idemd.UnavailableError):
        call_with_retry_sync(send, idemd.RetryPolicy(max_sends=3), sleep=clock.sleep_sync, clock=clock)  # type: ignore[arg-type]
    assert len(timeouts) == 3


def timing_out(clock: Clock, lost: int) -> Callable[[float], str]:
    """A blocking send whose first ``lost`` copies run out their whole timeout (a lost
    reply), then one answered 0.1 s after it was sent."""
    sends = [0]

    def send(timeout: float) -> str:
        sends[0] += 1
        if sends[0] <= lost:
            clock.now += timeout
            raise FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED)
        clock.now += 0.1
        return "ok"

    return send


async def test_the_answered_send_s_start_is_reported() -> None:
    # Sends at 0 and 0.85 time out after 0.8 s (0.05 s backoff each); the one at 1.7
    # is answered: its start, not the first send's, is what the answer counts from.
    clock = Clock()
    send_sync = timing_out(clock, lost=2)

    async def send(timeout: float) -> str:
        return send_sync(timeout)

    policy = idemd.RetryPolicy(initial_backoff=0.05, max_backoff=0.05, call_timeout=0.8)
    answer, sent_at = await call_with_retry_answered(
        send, policy, sleep=clock.sleep, uniform=lambda a, b: b, clock=clock
    )
    assert answer == "ok" and sent_at == pytest.approx(1.7) and clock.now == pytest.approx(1.8)


def test_sync_the_answered_send_s_start_is_reported() -> None:
    clock = SyncClock()
    policy = idemd.RetryPolicy(initial_backoff=0.05, max_backoff=0.05, call_timeout=0.8)
    answer, sent_at = call_with_retry_answered_sync(
        timing_out(clock, lost=2), policy, sleep=clock.sleep_sync, uniform=lambda a, b: b, clock=clock
    )
    assert answer == "ok" and sent_at == pytest.approx(1.7) and clock.now == pytest.approx(1.8)
