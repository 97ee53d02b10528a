"""ASGI middleware for the IETF ``Idempotency-Key`` header (works with Starlette, FastAPI
and any ASGI app), backed by idemd through :func:`idemd.execute.execute_once`.

For the configured methods (POST and PATCH by default):

* no ``Idempotency-Key`` where one is required: 400;
* a key but no caller to scope it to (no principal; see below): 400;
* the same key with another request (method, path, query, content type, body): 422
  (``conflict_status``);
* the same key while the first request still runs: 409 with ``Retry-After``
  (``in_progress_status``);
* the same key again: the stored response replayed (status, the headers kept, body),
  with ``Idempotent-Replayed: true``, without calling the app.

The app's response is stored once the app has sent all of it, whatever its status,
and only then sent to the client: a client never sees a response that a retry would
not see again. A response is buffered whole (at most ``max_response_bytes``; idemd
keeps results up to 1 MiB by default). The key is the header's sf-string
(``"8e03978e-…"``; a bare token is accepted too), scoped per caller, operation and
tenant; the operation defaults to ``http.<method><path>``.

Keys are per caller: ``principal(scope)`` names the caller (default: the request's
``Authorization`` header), and idemd is sent
:func:`idemd.http.scoped_key` ``(principal, key)`` (a hash of the principal, never
the principal itself), so two callers who send the same key get their own effects
and responses. A request with a key but no principal is refused with 400 unless
``shared_keys=True`` (every caller of the route shares one key space: only for routes
whose callers are one system). Scoped, a key may be at most 222 bytes.

An app that raises leaves the outcome UNKNOWN at idemd, and the exception propagates.
A retry after that (ReconcileFirst: an earlier attempt may have taken effect) never
runs the app: it declines (Fail NOT_STARTED) and is answered 500, unless
``reconcile_first="run"``, which declares that the app's providers deduplicate by the
key it passes them: the app then runs again with ``scope["state"]["idempotency"]`` set
to the :class:`~idemd.execute.EffectContext` (``previous_outcome_unknown``, and
``operation_id`` to pass to providers as their idempotency key). The HTTP mapping is
:mod:`idemd.http`, shared with :mod:`idemd.wsgi`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from idemd import http
from idemd.client import Client
from idemd.errors import IdemError
from idemd.execute import EffectContext, Success, execute_once
from idemd.http import DEFAULT_KEEP_HEADERS, parse_key, scoped_key  # re-exported

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

__all__ = [
    "DEFAULT_KEEP_HEADERS",
    "IdempotencyMiddleware",
    "default_operation",
    "default_principal",
    "parse_key",
    "scoped_key",
]


class IdempotencyMiddleware(http.Middleware[ASGIApp, Client, Scope]):
    """``client``: an idemd :class:`~idemd.client.Client`, or a function that makes one,
    called once inside the serving event loop (for servers and test clients that run
    the app on a loop of their own). ``pending_wait``: how long a request for a key
    that is still running waits for it before answering ``in_progress_status``.
    ``conflict_status`` (default 422) and ``in_progress_status`` (default 409): the
    statuses of those refusals, ints in 400..599 (else ValueError). ``principal``: a
    function of the ASGI scope naming the caller (None: no caller); ``shared_keys``:
    one key space for every caller. ``header`` (any case), ``methods``,
    ``keep_headers``, ``lease``, ``attempt_duration``, ``max_request_bytes``,
    ``max_response_bytes`` and ``reconcile_first`` as the module's documentation says."""

    _client_type = Client

    def _use_header(self, header: str) -> None:
        self.header = header.lower().encode("latin-1")

    def _default_operation(self, request: Scope) -> str:
        return default_operation(request)

    def _default_principal(self, request: Scope) -> str | None:
        return default_principal(request)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw_key = next((v for k, v in scope["headers"] if k.lower() == self.header), None)
        admitted = self.admit(scope["method"], None if raw_key is None else raw_key.decode("latin-1"), scope)
        if admitted is None:
            await self.app(scope, receive, send)
            return
        if isinstance(admitted, http.Response):
            await _send(send, admitted)
            return
        try:
            body = await _read_body(receive, self.request_buffer())
        except http.TooLarge:
            await _send(send, http.TOO_LARGE)
            return
        content_type = next((v for k, v in scope["headers"] if k.lower() == b"content-type"), b"")
        try:
            options = self.execute_options(
                scope["method"],
                scope.get("path", "/"),
                bytes(scope.get("query_string", b"")).decode("latin-1"),
                bytes(content_type).decode("latin-1"),
                body,
                lambda: [(bytes(k).decode("latin-1"), bytes(v).decode("latin-1")) for k, v in scope["headers"]],
            )
        except IdemError as error:  # a body the selector cannot apply to: 400
            await _send(send, self.answer(error))
            return

        async def effect(ctx: EffectContext) -> Success:
            return await self._run_app(scope, body, ctx)

        try:
            result = await execute_once(self.client(), self.operation(scope), admitted, effect=effect, **options)
        except IdemError as error:
            await _send(send, self.answer(error))
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

        response = self.response_buffer()

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                response.status = int(message["status"])
                response.headers = [
                    (bytes(k).decode("latin-1"), bytes(v).decode("latin-1")) for k, v in message.get("headers", [])
                ]
            elif message["type"] == "http.response.body":
                response.add(bytes(message.get("body", b"")))

        await self.app(scope, replay_body, capture)
        return response.stored(self.keep_headers)


def default_operation(scope: Scope) -> str:
    """``http.<method><path>`` in idemd's operation alphabet, at most 128 characters."""
    return http.operation_name(str(scope["method"]), str(scope.get("path", "/")))


def default_principal(scope: Scope) -> str | None:
    """The request's ``Authorization`` header (its first, as sent), None when absent."""
    value = next((v for k, v in scope["headers"] if k.lower() == b"authorization"), None)
    return None if value is None else bytes(value).decode("latin-1")


async def _read_body(receive: Receive, body: http.Buffer) -> bytes:
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        body.add(bytes(message.get("body", b"")))
        if not message.get("more_body", False):
            break
    return body.body()


async def _send(send: Send, response: http.Response) -> None:
    headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in response.headers]
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body, "more_body": False})
