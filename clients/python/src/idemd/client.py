"""A typed asyncio client over every idemd RPC.

Every call carries ``authorization: Bearer <token>``, is re-sent unchanged as
:mod:`idemd.retry` decides, and raises a typed :mod:`idemd.errors` exception
decoded from the status's google.rpc details. Durations are seconds (float).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import grpc
import grpc.aio

from idemd import wire
from idemd.execute import Effect, Result, execute_once
from idemd.proto import pb
from idemd.retry import DEFAULT_RETRY, RetryPolicy, call_with_retry_answered
from idemd.wire import Req, Resp, Rpc


class Client:
    """An idemd client on one gRPC channel. Create it inside the running event loop;
    ``async with Client(...) as client`` closes the channel at the end.

    ``target`` is ``host:port`` (plaintext, or TLS with ``credentials``),
    ``http://host:port`` (plaintext) or ``https://host:port`` (TLS: ``credentials``,
    else the system's CA roots); None reads ``IDEMD_ADDR``. ``token`` is the tenant's
    bearer token; None reads ``IDEMD_TOKEN``. A missing or empty token raises
    :class:`idemd.errors.EmptyTokenError` here, before any connection; a bad address
    :class:`idemd.errors.InvalidAddressError`. Pass ``credentials``
    (``grpc.ssl_channel_credentials(...)``, for mTLS or a private CA) or a ready
    ``channel``. ``options`` are gRPC channel options, added to (and overriding)
    :data:`idemd.wire.DEFAULT_CHANNEL_OPTIONS`.
    """

    def __init__(
        self,
        target: str | None = None,
        token: str | None = None,
        *,
        credentials: grpc.ChannelCredentials | None = None,
        channel: grpc.aio.Channel | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        token = wire.resolve_token(token)
        if channel is None:
            endpoint = wire.resolve_endpoint(target, credentials)
            if endpoint.credentials is None:
                channel = grpc.aio.insecure_channel(endpoint.target, options=wire.channel_options(options))
            else:
                channel = grpc.aio.secure_channel(
                    endpoint.target, endpoint.credentials, options=wire.channel_options(options)
                )
        self._channel = channel
        self.retry = retry
        self._metadata = wire.bearer(token)
        self._calls = wire.bind_rpcs(channel)

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close(None)

    async def _send(
        self,
        rpc: Rpc[Req, Resp],
        request: Req,
        *,
        deadline: float | None,
        extra_timeout: float = 0.0,
    ) -> Resp:
        response, _sent_at = await self._send_answered(
            rpc, request, deadline=deadline, extra_timeout=extra_timeout
        )
        return response

    async def _send_answered(
        self,
        rpc: Rpc[Req, Resp],
        request: Req,
        *,
        deadline: float | None,
        extra_timeout: float = 0.0,
    ) -> tuple[Resp, float]:
        """:meth:`_send`, also returning the ``time.monotonic()`` at which the send
        that was answered began (each re-send is a call of its own)."""
        call: grpc.aio.UnaryUnaryMultiCallable[Req, Resp] = self._calls[rpc]

        async def send(timeout: float) -> Resp:
            return await call(request, timeout=timeout, metadata=self._metadata)

        return await call_with_retry_answered(
            send, self.retry, deadline=deadline, extra_timeout=extra_timeout
        )

    # ---- Claim ------------------------------------------------------------

    claim_request = staticmethod(wire.claim_request)

    async def send_claim(
        self, request: pb.ClaimRequest, *, deadline: float | None = None
    ) -> tuple[pb.ClaimResponse, float]:
        """Sends a prepared Claim (re-sent unchanged, same claim_token, after
        UNAVAILABLE or a lost reply). Returns the answer and the ``time.monotonic()``
        at which the send it answers began, from which its lease and attempt
        deadline count: the server counts them from its handling of that very send
        (an abandoned send's reply is never read)."""
        return await self._send_answered(
            wire.CLAIM, request, deadline=deadline, extra_timeout=wire.claim_wait(request)
        )

    async def claim(
        self, operation: str, key: str, *, deadline: float | None = None, **fields: Any
    ) -> pb.ClaimResponse:
        """Claim: start or rejoin an operation (fields as :meth:`claim_request`)."""
        response, _ = await self.send_claim(
            self.claim_request(operation, key, **fields), deadline=deadline
        )
        return response

    # ---- owner writes -------------------------------------------------------

    async def send_renew(
        self,
        operation_id: str,
        fence: int,
        *,
        lease: float | None = None,
        deadline: float | None = None,
    ) -> tuple[pb.RenewResponse, float]:
        """Renew; returns the answer and the monotonic time at which the send it
        answers began (its lease counts from there, as a Claim's)."""
        request = wire.renew_request(operation_id, fence, lease)
        return await self._send_answered(wire.RENEW, request, deadline=deadline)

    async def renew(
        self,
        operation_id: str,
        fence: int,
        *,
        lease: float | None = None,
        deadline: float | None = None,
    ) -> pb.RenewResponse:
        """Renew: extend the owner's lease, never past the attempt deadline."""
        response, _ = await self.send_renew(
            operation_id, fence, lease=lease, deadline=deadline
        )
        return response

    async def complete(
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
        request = wire.complete_request(operation_id, fence, body, content_type, metadata)
        return await self._send(wire.COMPLETE, request, deadline=deadline)

    async def fail(
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
        """Fail with a disposition: ``pb.FAIL_DISPOSITION_TERMINAL``, ``_RETRYABLE``
        (the effect certainly did not happen) or ``_UNKNOWN`` (it may have)."""
        request = wire.fail_request(operation_id, fence, disposition, code, message, metadata, retry_after)
        return await self._send(wire.FAIL, request, deadline=deadline)

    # ---- reads and reconciliation ------------------------------------------------

    async def lookup(
        self,
        *,
        operation_id: str | None = None,
        operation: str | None = None,
        key: str | None = None,
        include_history: bool = False,
        deadline: float | None = None,
    ) -> pb.LookupResponse:
        """Lookup by ``operation_id``, or by scope (``operation`` and ``key``)."""
        request = wire.lookup_request(operation_id, operation, key, include_history)
        return await self._send(wire.LOOKUP, request, deadline=deadline)

    async def reconcile(
        self,
        operation_id: str,
        expected_fence: int,
        *,
        succeeded: pb.Result | None = None,
        failed: pb.OperationError | None = None,
        not_applied: bool = False,
        deadline: float | None = None,
    ) -> pb.ReconcileResponse:
        """Reconcile from outside evidence: exactly one of ``succeeded``, ``failed``,
        ``not_applied``."""
        request = wire.reconcile_request(operation_id, expected_fence, succeeded, failed, not_applied)
        return await self._send(wire.RECONCILE, request, deadline=deadline)

    async def list_unresolved(
        self,
        *,
        operation: str = "",
        page_size: int = 0,
        page_token: str = "",
        deadline: float | None = None,
    ) -> pb.ListUnresolvedResponse:
        """One page of the operations a reconciler must look at, oldest first."""
        request = wire.list_unresolved_request(operation, page_size, page_token)
        return await self._send(wire.LIST_UNRESOLVED, request, deadline=deadline)

    async def list_operations(
        self,
        *,
        filter: str = "",
        page_size: int = 0,
        page_token: str = "",
        order: pb.ListOperationsRequest.Order = pb.ListOperationsRequest.ORDER_UNSPECIFIED,
        deadline: float | None = None,
    ) -> pb.ListOperationsResponse:
        """One page of the operations that match ``filter`` (docs/api.md has the
        language), oldest first unless ``order`` is ``pb.ListOperationsRequest.ORDER_NEWEST_FIRST``.
        Needs the ``reconcile`` or the ``admin`` scope."""
        request = wire.list_operations_request(filter, page_size, page_token, order)
        return await self._send(wire.LIST_OPERATIONS, request, deadline=deadline)

    async def execute_once(
        self,
        operation: str,
        key: str,
        payload: str | bytes | Mapping[str, Any] | list[Any] | None,
        effect: Effect,
        **options: Any,
    ) -> Result:
        """:func:`idemd.execute.execute_once` on this client."""
        return await execute_once(self, operation, key, payload, effect, **options)
