"""The blocking client, for Django, Flask, Celery workers and any code without asyncio.

    with idemd.sync.Client() as client:  # IDEMD_ADDR, IDEMD_TOKEN
        result = client.execute_once("payments.charge", key, payload, charge, provider_deduplicates=True)

:class:`Client` is :class:`idemd.Client` over grpc's blocking channel: every RPC, the
same requests, the same typed :mod:`idemd.errors`, the same re-sends
(:mod:`idemd.retry`). :func:`execute_once` drives the same protocol
(:mod:`idemd.protocol`) as the asyncio one. What differs is only how the steps run:

* the effect runs on the calling thread (its thread-locals, database connections and
  transactions are the caller's), while a background thread renews the lease;
* a blocking effect cannot be interrupted. At the attempt deadline (or when the lease
  is lost) ``ctx.cancelled`` is set, and at the deadline the attempt is reported
  UNKNOWN to idemd at once, exactly as the asyncio client does when it cancels its
  effect; whatever the effect returns afterwards is never recorded: the call raises
  :class:`~idemd.errors.AttemptTimeoutError` (or answers what a new owner stored) once
  it returns. Bound the effect's provider calls by ``ctx.remaining()`` and stop when
  ``ctx.cancelled`` is set.

A Client is safe to share between threads (gRPC channels are).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from idemd.proto import pb
from idemd.protocol import (
    Attempt,
    Call,
    EffectContext,
    Guarded,
    Outcome,
    Result,
    Sleep,
    StartRenewing,
    Step,
    StopRenewing,
    Success,
    Terminal,
    execute_once_steps,
    run_steps,
)
from idemd.retry import DEFAULT_RETRY, RetryPolicy, call_with_retry_answered_sync
from idemd.selector import Selector
from idemd.wire import (
    CLAIM,
    COMPLETE,
    FAIL,
    LIST_OPERATIONS,
    LIST_UNRESOLVED,
    LOOKUP,
    RECONCILE,
    RENEW,
    Rpc,
    bearer,
    bind_rpcs,
    channel_options,
    claim_request,
    claim_wait,
    complete_request,
    fail_request,
    list_operations_request,
    list_unresolved_request,
    lookup_request,
    reconcile_request,
    renew_request,
    resolve_endpoint,
    resolve_token,
)

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)

#: A blocking effect: returns its outcome; should honour ``ctx.cancelled``.
Effect = Callable[[EffectContext], Outcome]
#: Asked on ReconcileFirst: the earlier attempt's outcome as the provider has it, None
#: if the provider has nothing; it must read the provider's current state (not a
#: cache, not a lagging replica).
Lookup = Callable[[EffectContext], Success | Terminal | None]


class Client:
    """A blocking idemd client on one gRPC channel; ``with Client(...) as client``
    closes it at the end. Arguments as :class:`idemd.Client` (``channel`` is a
    ``grpc.Channel``); methods as its, without ``await``."""

    def __init__(
        self,
        target: str | None = None,
        token: str | None = None,
        *,
        credentials: grpc.ChannelCredentials | None = None,
        channel: grpc.Channel | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        token = resolve_token(token)
        if channel is None:
            endpoint = resolve_endpoint(target, credentials)
            if endpoint.credentials is None:
                channel = grpc.insecure_channel(endpoint.target, options=channel_options(options))
            else:
                channel = grpc.secure_channel(endpoint.target, endpoint.credentials, options=channel_options(options))
        self._channel = channel
        self.retry = retry
        self._metadata = bearer(token)
        self._calls = bind_rpcs(channel)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _send(
        self, rpc: Rpc[Req, Resp], request: Req, *, deadline: float | None, extra_timeout: float = 0.0
    ) -> Resp:
        return self._send_answered(rpc, request, deadline=deadline, extra_timeout=extra_timeout)[0]

    def _send_answered(
        self, rpc: Rpc[Req, Resp], request: Req, *, deadline: float | None, extra_timeout: float = 0.0
    ) -> tuple[Resp, float]:
        """:meth:`_send`, also returning the ``time.monotonic()`` at which the send
        that was answered began (each re-send is a call of its own)."""
        call: grpc.UnaryUnaryMultiCallable[Req, Resp] = self._calls[rpc]

        def send(timeout: float) -> Resp:
            return call(request, timeout=timeout, metadata=self._metadata)

        return call_with_retry_answered_sync(send, self.retry, deadline=deadline, extra_timeout=extra_timeout)

    claim_request = staticmethod(claim_request)

    def send_claim(
        self, request: pb.ClaimRequest, *, deadline: float | None = None
    ) -> tuple[pb.ClaimResponse, float]:
        """Sends a prepared Claim (re-sent unchanged, same claim_token); returns the
        answer and the ``time.monotonic()`` at which the send it answers began, from
        which its lease and attempt deadline count (as :meth:`idemd.Client.send_claim`)."""
        return self._send_answered(CLAIM, request, deadline=deadline, extra_timeout=claim_wait(request))

    def claim(self, operation: str, key: str, *, deadline: float | None = None, **fields: Any) -> pb.ClaimResponse:
        """Claim: start or rejoin an operation (fields as :func:`idemd.wire.claim_request`)."""
        response, _ = self.send_claim(claim_request(operation, key, **fields), deadline=deadline)
        return response

    def send_renew(
        self, operation_id: str, fence: int, *, lease: float | None = None, deadline: float | None = None
    ) -> tuple[pb.RenewResponse, float]:
        """Renew; returns the answer and the monotonic time at which the send it
        answers began (its lease counts from there, as a Claim's)."""
        request = renew_request(operation_id, fence, lease)
        return self._send_answered(RENEW, request, deadline=deadline)

    def renew(
        self, operation_id: str, fence: int, *, lease: float | None = None, deadline: float | None = None
    ) -> pb.RenewResponse:
        """Renew: extend the owner's lease, never past the attempt deadline."""
        return self.send_renew(operation_id, fence, lease=lease, deadline=deadline)[0]

    def complete(
        self,
        operation_id: str,
        fence: int,
        body: bytes,
        *,
        content_type: str = "",
        metadata: Mapping[str, str] | None = None,
        deadline: float | None = None,
    ) -> pb.CompleteResponse:
        """Complete: record the success result. Only the current fence may."""
        request = complete_request(operation_id, fence, body, content_type, metadata)
        return self._send(COMPLETE, request, deadline=deadline)

    def fail(
        self,
        operation_id: str,
        fence: int,
        disposition: pb.FailDisposition,
        *,
        code: str,
        message: str = "",
        metadata: Mapping[str, str] | None = None,
        retry_after: float | None = None,
        deadline: float | None = None,
    ) -> pb.FailResponse:
        """Fail with a disposition: TERMINAL, RETRYABLE (certainly not applied) or UNKNOWN."""
        request = fail_request(operation_id, fence, disposition, code, message, metadata, retry_after)
        return self._send(FAIL, request, deadline=deadline)

    def lookup(
        self,
        *,
        operation_id: str | None = None,
        operation: str | None = None,
        key: str | None = None,
        include_history: bool = False,
        deadline: float | None = None,
    ) -> pb.LookupResponse:
        """Lookup by ``operation_id``, or by scope (``operation`` and ``key``)."""
        request = lookup_request(operation_id, operation, key, include_history)
        return self._send(LOOKUP, request, deadline=deadline)

    def reconcile(
        self,
        operation_id: str,
        expected_fence: int,
        *,
        succeeded: pb.Result | None = None,
        failed: pb.OperationError | None = None,
        not_applied: bool = False,
        deadline: float | None = None,
    ) -> pb.ReconcileResponse:
        """Reconcile from outside evidence: exactly one of ``succeeded``, ``failed``, ``not_applied``."""
        request = reconcile_request(operation_id, expected_fence, succeeded, failed, not_applied)
        return self._send(RECONCILE, request, deadline=deadline)

    def list_unresolved(
        self, *, operation: str = "", page_size: int = 0, page_token: str = "", deadline: float | None = None
    ) -> pb.ListUnresolvedResponse:
        """One page of the operations a reconciler must look at, oldest first."""
        request = list_unresolved_request(operation, page_size, page_token)
        return self._send(LIST_UNRESOLVED, request, deadline=deadline)

    def list_operations(
        self,
        *,
        filter: str = "",
        page_size: int = 0,
        page_token: str = "",
        order: pb.ListOperationsRequest.Order = pb.ListOperationsRequest.ORDER_UNSPECIFIED,
        deadline: float | None = None,
    ) -> pb.ListOperationsResponse:
        """One page of the operations that match ``filter`` (docs/api.md has the language),
        oldest first unless ``order`` is ``pb.ListOperationsRequest.ORDER_NEWEST_FIRST``.
        Needs the ``reconcile`` or the ``admin`` scope."""
        request = list_operations_request(filter, page_size, page_token, order)
        return self._send(LIST_OPERATIONS, request, deadline=deadline)

    def execute_once(
        self,
        operation: str,
        key: str,
        payload: str | bytes | Mapping[str, Any] | list[Any] | None,
        effect: Effect,
        **options: Any,
    ) -> Result:
        """:func:`execute_once` on this client."""
        return execute_once(self, operation, key, payload, effect, **options)


def execute_once(
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
    provider_deduplicates: bool = False,
    fingerprint: bytes | None = None,
    max_attempts: int = 0,
    retention: float | None = None,
    operation_deadline: float | None = None,
    lookup_interval: float = 1.0,
    selector: Selector | None = None,
    previous_fingerprints: Sequence[bytes] = (),
) -> Result:
    """Runs the blocking ``effect`` at most once for ``(operation, key, payload)``.

    Arguments, answers and exceptions as :func:`idemd.execute.execute_once` (on
    ReconcileFirst: a ``lookup``, or ``provider_deduplicates=True``, or the effect
    never runs and :class:`~idemd.errors.OutcomeUnknownError` is raised); the effect
    and ``lookup`` are plain functions that run on the calling thread and should stop
    when ``ctx.cancelled`` is set (see the module's documentation).
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
    return run_steps(steps, _Driver(client, effect, lookup).perform)


class _RenewalsStopped(Exception):
    """Thrown into the renewals when their attempt is over."""


class _Driver:
    """Performs the protocol's steps with blocking calls; renewals on a thread."""

    def __init__(self, client: Client, effect: Effect, lookup: Lookup | None) -> None:
        self.client = client
        self.effect = effect
        self.lookup = lookup
        self.stops: dict[Attempt, threading.Event] = {}

    def perform(self, step: Step) -> Any:
        if isinstance(step, Call):
            return getattr(self.client, step.method)(*step.args, **step.kwargs)
        if isinstance(step, Sleep):
            time.sleep(step.seconds)
            return None
        if isinstance(step, Guarded):
            return self.guarded(step)
        if isinstance(step, StartRenewing):
            stop = self.stops[step.attempt] = threading.Event()
            threading.Thread(
                target=self._renew_until, args=(step.attempt, stop), name="idemd-renew", daemon=True
            ).start()
            return None
        if isinstance(step, StopRenewing):
            stopping = self.stops.pop(step.attempt, None)
            if stopping is not None:
                stopping.set()
            return None
        raise TypeError(f"not a protocol step: {step!r}")

    def _renew_until(self, attempt: Attempt, stop: threading.Event) -> None:
        def perform(step: Step) -> Any:
            if isinstance(step, Sleep):
                if stop.wait(step.seconds):
                    raise _RenewalsStopped()
                return None
            if stop.is_set():
                raise _RenewalsStopped()
            return self.perform(step)

        # Stopped, or e.g. the channel closed under it: the lease then lapses, which
        # the protocol allows for (the next owner reconciles first).
        with contextlib.suppress(Exception):
            run_steps(attempt.keep_renewing(), perform)

    def guarded(self, step: Guarded) -> Any:
        """Runs the effect or the lookup on this thread with a watchdog for the
        attempt's deadline, or pauses; raises the attempt's interruption instead of
        the answer when the lease was lost or the time ran out meanwhile."""
        attempt = step.attempt
        if step.what == "sleep":
            pause = min(step.seconds, attempt.cancel_at - time.monotonic())
            attempt.ctx.cancelled.wait(max(0.0, pause))
            if (interrupted := attempt.interruption()) is not None:
                raise interrupted
            return None
        watchdog = threading.Timer(
            max(0.0, attempt.cancel_at - time.monotonic()), self._time_is_up, args=(attempt,)
        )
        watchdog.daemon = True
        watchdog.start()
        try:
            if step.what == "effect":
                answer: Any = self.effect(attempt.ctx)
            else:
                assert self.lookup is not None  # the protocol asks only when there is one
                answer = self.lookup(attempt.ctx)
        except Exception:
            if (interrupted := attempt.interruption()) is not None:
                raise interrupted from None
            raise
        finally:
            watchdog.cancel()
        if (interrupted := attempt.interruption()) is not None:
            raise interrupted
        return answer

    def _time_is_up(self, attempt: Attempt) -> None:
        """The watchdog: the effect (or the lookup) still runs at the attempt deadline.
        Tell it to stop and report now, while idemd still accepts this owner's write (as
        the asyncio client does when it cancels): UNKNOWN for the effect, NOT_STARTED
        for a lookup (the effect never started). The protocol sends the same report
        again once it returns, answered from this one's receipt."""
        if attempt.lost:
            return
        attempt.timed_out = True
        attempt.ctx.cancelled.set()
        with contextlib.suppress(Exception):  # best effort, as fail_unknown itself is
            run_steps(attempt.report_time_up(), self.perform)


__all__ = ["Client", "Effect", "Lookup", "execute_once"]
