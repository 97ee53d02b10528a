"""ASGI middleware for the IETF ``Idempotency-Key`` header (works with Starlette, FastAPI
and any ASGI app), backed by idemd through :func:`idemd.execute.execute_once`.

For the configured methods (POST and PATCH by default):

* no ``Idempotency-Key`` where one is required: 400;
* the same key with another request (method, path, query, content type, body): 422;
* the same key while the first request still runs: 409 with ``Retry-After``;
* the same key again: the stored response replayed (status, the headers kept, body),
  with ``Idempotent-Replayed: true``, without calling the app.

The app's response is stored once the app has sent all of it, whatever its status,
and only then sent to the client: a client never sees a response that a retry would
not see again. A response is buffered whole (at most ``max_response_bytes``; idemd
keeps results up to 1 MiB by default). The key is the header's sf-string
(``"8e03978e-…"``; a bare token is accepted too), scoped per tenant and operation;
the operation defaults to ``http.<method><path>``.

An app that raises leaves the outcome UNKNOWN at idemd, and the exception propagates.
A retry after that (ReconcileFirst: an earlier attempt may have taken effect) is
refused with 500 unless ``reconcile_first="run"``, in which case the app runs again
with ``scope["state"]["idempotency"]`` set to the :class:`~idemd.execute.EffectContext`
(``previous_outcome_unknown``, and ``operation_id`` to pass to providers as their
idempotency key). The HTTP mapping is :mod:`idemd.http`, shared with :mod:`idemd.wsgi`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, Literal

from idemd import http
from idemd.client import Client
from idemd.errors import IdemError
from idemd.execute import EffectContext, Success, Unknown, execute_once
from idemd.http import DEFAULT_KEEP_HEADERS, parse_key

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

__all__ = ["DEFAULT_KEEP_HEADERS", "IdempotencyMiddleware", "default_operation", "parse_key"]


class _TooLarge(Exception):
    pass


class IdempotencyMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        client: Client | Callable[[], Client],
        methods: Iterable[str] = ("POST", "PATCH"),
        required: bool = True,
        header: str = "idempotency-key",
        operation: Callable[[Scope], str] | None = None,
        keep_headers: Iterable[str] = DEFAULT_KEEP_HEADERS,
        lease: float = 30.0,
        attempt_duration: float = 300.0,
        pending_wait: float = 0.0,
        max_request_bytes: int = 1 << 20,
        max_response_bytes: int = 1 << 20,
        reconcile_first: Literal["refuse", "run"] = "refuse",
    ) -> None:
        """``client``: an idemd :class:`~idemd.client.Client`, or a function that makes
        one, called once inside the serving event loop (for servers and test clients
        that run the app on a loop of their own). ``pending_wait``: how long a request
        for a key that is still running waits for it before answering 409."""
        self.app = app
        self._client = client if isinstance(client, Client) else None
        self._make_client = None if isinstance(client, Client) else client
        self.methods = {method.upper() for method in methods}
        self.required = required
        self.header = header.lower().encode("latin-1")
        self.operation = operation or default_operation
        self.keep_headers = [name.lower() for name in keep_headers]
        self.lease = lease
        self.attempt_duration = attempt_duration
        self.pending_wait = pending_wait
        self.max_request_bytes = max_request_bytes
        self.max_response_bytes = max_response_bytes
        self.reconcile_first = reconcile_first

    def client(self) -> Client:
        if self._client is None:
            assert self._make_client is not None
            self._client = self._make_client()
        return self._client

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"].upper() not in self.methods:
            await self.app(scope, receive, send)
            return
        raw_key = next((v for k, v in scope["headers"] if k.lower() == self.header), None)
        if raw_key is None:
            if self.required:
                await _send(send, http.MISSING_KEY)
                return
            await self.app(scope, receive, send)
            return
        key = parse_key(raw_key.decode("latin-1"))
        if not http.valid_key(key):
            await _send(send, http.INVALID_KEY)
            return
        try:
            body = await _read_body(receive, self.max_request_bytes)
        except _TooLarge:
            await _send(send, http.TOO_LARGE)
            return
        content_type = next((v for k, v in scope["headers"] if k.lower() == b"content-type"), b"")
        identity = http.request_identity(
            scope["method"],
            scope.get("path", "/"),
            bytes(scope.get("query_string", b"")).decode("latin-1"),
            bytes(content_type).decode("latin-1"),
            body,
        )

        async def effect(ctx: EffectContext) -> Success | Unknown:
            return http.refuse_unknown(ctx, self.reconcile_first) or await self._run_app(scope, body, ctx)

        try:
            result = await execute_once(
                self.client(),
                self.operation(scope),
                key,
                effect=effect,
                lease=self.lease,
                attempt_duration=self.attempt_duration,
                deadline=self.pending_wait,
                **identity,
            )
        except IdemError as error:
            await _send(send, http.answer_for(error))
            return
        await _send(send, http.replayed(result))

    async def _run_app(self, scope: Scope, body: bytes, ctx: EffectContext) -> Success:
        state = scope.setdefault("state", {})
        state["idempotency"] = ctx
        delivered = False

        async def replay_body() -> Message:
            nonlocal delivered
            if delivered:
                return {"type": "http.disconnect"}
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        status = 500
        headers: list[tuple[str, str]] = []
        chunks: list[bytes] = []
        size = 0

        async def capture(message: Message) -> None:
            nonlocal status, headers, size
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = [
                    (bytes(k).decode("latin-1"), bytes(v).decode("latin-1")) for k, v in message.get("headers", [])
                ]
            elif message["type"] == "http.response.body":
                chunk = bytes(message.get("body", b""))
                size += len(chunk)
                if size > self.max_response_bytes:
                    raise _TooLarge("the response is larger than max_response_bytes")
                chunks.append(chunk)

        await self.app(scope, replay_body, capture)
        return http.stored(status, headers, b"".join(chunks), self.keep_headers)


def default_operation(scope: Scope) -> str:
    """``http.<method><path>`` in idemd's operation alphabet, at most 128 characters."""
    return http.operation_name(str(scope["method"]), str(scope.get("path", "/")))


async def _read_body(receive: Receive, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = bytes(message.get("body", b""))
        size += len(chunk)
        if size > limit:
            raise _TooLarge()
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _send(send: Send, response: http.Response) -> None:
    headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in response.headers]
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body, "more_body": False})
