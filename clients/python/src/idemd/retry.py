"""The one place that decides which failed calls are re-sent, and how.

Every idemd RPC is safe to re-send unchanged after UNAVAILABLE or a lost reply (a
Claim keeps its claim_token, owner writes are answered from their receipt). So:

* re-sent, unchanged, with exponential backoff and full jitter, within an attempt
  count and a total deadline, never sooner than the server's RetryInfo asks:
  UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, and transport failures (a
  status without idemd's ErrorInfo, e.g. a connection reset: UNKNOWN or INTERNAL);
* never re-sent: INVALID_ARGUMENT, FAILED_PRECONDITION, PERMISSION_DENIED,
  UNAUTHENTICATED, NOT_FOUND, ABORTED, and idemd's own INTERNAL. Re-sending those
  cannot change the answer; ABORTED (LEASE_LOST) calls for a Lookup, not a re-send.

Each send is a call of its own, and an abandoned send's reply is never read: the
answer returned belongs to the send that got it. :func:`call_with_retry_answered`
(and :func:`call_with_retry_answered_sync`) also return when that send began, the
instant from which the durations in the answer count (the server counts them from its
handling of that very send).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import grpc

from idemd.errors import (
    DeadlineExceededError,
    RequestTooLargeError,
    StatusError,
    from_rpc_error,
)

T = TypeVar("T")

RETRIED_CODES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)
NEVER_RETRIED_CODES = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.ABORTED,
    }
)
# Codes the transport itself produces when a connection breaks mid-call; from idemd
# they carry an ErrorInfo (INTERNAL) and are not retried.
_TRANSPORT_CODES = frozenset({grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL})


@dataclass(frozen=True)
class RetryPolicy:
    """How a call is re-sent. Times are seconds."""

    #: Sends in all, the first included.
    max_sends: int = 10
    initial_backoff: float = 0.05
    max_backoff: float = 2.0
    multiplier: float = 2.0
    #: No re-send starts later than this after the first send.
    total_timeout: float = 30.0
    #: The gRPC deadline of each send (a Claim's ``wait`` is added to it).
    call_timeout: float = 10.0

    def backoff_cap(self, resend: int) -> float:
        """The backoff ceiling before re-send number ``resend`` (1-based)."""
        return min(self.max_backoff, self.initial_backoff * self.multiplier ** (resend - 1))


DEFAULT_RETRY = RetryPolicy()
NO_RETRY = RetryPolicy(max_sends=1)


def is_retryable(error: StatusError) -> bool:
    if isinstance(error, RequestTooLargeError):
        return False
    if error.code in RETRIED_CODES:
        return True
    return error.code in _TRANSPORT_CODES and error.reason is None


class RetryPlan:
    """The re-send decisions for one call, shared by the asyncio and the blocking
    loops (:func:`call_with_retry`, :func:`call_with_retry_sync`): how long each send
    may take, and after a failure whether (and after how long) it is sent again."""

    def __init__(
        self,
        policy: RetryPolicy,
        *,
        deadline: float | None = None,
        extra_timeout: float = 0.0,
        uniform: Callable[[float, float], float] = random.uniform,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = policy
        self.extra_timeout = extra_timeout
        self.uniform = uniform
        self.clock = clock
        self.end = clock() + policy.total_timeout
        if deadline is not None:
            self.end = min(self.end, deadline)
        self.sends = 0
        #: When the latest send began (``clock()`` just before it was made).
        self.sent_at = self.clock()

    def next_timeout(self) -> float:
        """The gRPC timeout of the next send, which the caller makes at once (its
        start is recorded as :attr:`sent_at`); raises DeadlineExceededError when no
        time is left to make one."""
        now = self.clock()
        remaining = self.end - now
        if remaining <= 0:
            raise DeadlineExceededError(
                grpc.StatusCode.DEADLINE_EXCEEDED, "no time left to send the call"
            )
        self.sends += 1
        self.sent_at = now
        return min(self.policy.call_timeout + self.extra_timeout, remaining)

    def delay_after(self, rpc_error: grpc.RpcError) -> float:
        """How long to sleep before re-sending after ``rpc_error``; raises its typed
        :class:`~idemd.errors.StatusError` when it is not re-sent."""
        error = from_rpc_error(rpc_error)
        if not is_retryable(error) or self.sends >= self.policy.max_sends:
            raise error
        delay = self.uniform(0.0, self.policy.backoff_cap(self.sends))
        if error.retry_after is not None:
            delay = max(delay, error.retry_after)
        if self.clock() + delay >= self.end:
            raise error
        return delay


async def call_with_retry_answered(
    send: Callable[[float], Awaitable[T]],
    policy: RetryPolicy,
    *,
    deadline: float | None = None,
    extra_timeout: float = 0.0,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    uniform: Callable[[float, float], float] = random.uniform,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[T, float]:
    """Calls ``send(timeout)`` until it returns, re-sending after retryable failures;
    returns its answer and when the send that got it began (a ``clock()`` instant).

    ``deadline`` (a ``time.monotonic()`` instant) further bounds the total time. A
    failure is raised as its typed :class:`~idemd.errors.StatusError`.
    """
    plan = RetryPlan(policy, deadline=deadline, extra_timeout=extra_timeout, uniform=uniform, clock=clock)
    while True:
        timeout = plan.next_timeout()
        try:
            return await send(timeout), plan.sent_at
        except grpc.RpcError as rpc_error:
            delay = plan.delay_after(rpc_error)
        await sleep(delay)


async def call_with_retry(
    send: Callable[[float], Awaitable[T]],
    policy: RetryPolicy,
    *,
    deadline: float | None = None,
    extra_timeout: float = 0.0,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    uniform: Callable[[float, float], float] = random.uniform,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """:func:`call_with_retry_answered`, the answer alone."""
    answer, _sent_at = await call_with_retry_answered(
        send, policy, deadline=deadline, extra_timeout=extra_timeout, sleep=sleep, uniform=uniform, clock=clock
    )
    return answer


def call_with_retry_answered_sync(
    send: Callable[[float], T],
    policy: RetryPolicy,
    *,
    deadline: float | None = None,
    extra_timeout: float = 0.0,
    sleep: Callable[[float], None] = time.sleep,
    uniform: Callable[[float, float], float] = random.uniform,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[T, float]:
    """:func:`call_with_retry_answered` for a blocking ``send(timeout)``."""
    plan = RetryPlan(policy, deadline=deadline, extra_timeout=extra_timeout, uniform=uniform, clock=clock)
    while True:
        timeout = plan.next_timeout()
        try:
            return send(timeout), plan.sent_at
        except grpc.RpcError as rpc_error:
            delay = plan.delay_after(rpc_error)
        sleep(delay)


def call_with_retry_sync(
    send: Callable[[float], T],
    policy: RetryPolicy,
    *,
    deadline: float | None = None,
    extra_timeout: float = 0.0,
    sleep: Callable[[float], None] = time.sleep,
    uniform: Callable[[float, float], float] = random.uniform,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """:func:`call_with_retry` for a blocking ``send(timeout)``."""
    answer, _sent_at = call_with_retry_answered_sync(
        send, policy, deadline=deadline, extra_timeout=extra_timeout, sleep=sleep, uniform=uniform, clock=clock
    )
    return answer
