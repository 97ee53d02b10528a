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
idempotency key).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, Literal

from idemd.client import Client
from idemd.errors import (
    ConflictError,
    IdemError,
    InvalidArgumentError,
    NeedsReconciliationError,
    OperationFailedError,
    OutcomeUnknownError,
    PendingError,
    ResultExpiredError,
    StatusError,
)
from idemd.execute import EffectContext, Result, Success, Unknown, execute_once
from idemd.fingerprint import fingerprint_bytes

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

DEFAULT_KEEP_HEADERS = (
    "location",
    "etag",
    "last-modified",
    "cache-control",
    "content-language",
    "link",
)
# json_payload/bytes_payload are bounded by the server (64 KiB by default); larger
# requests are fingerprinted here, exactly as the server would.
_MAX_SENT_PAYLOAD = 60 * 1024
_OPERATION_CHARS = re.compile(r"[^A-Za-z0-9._/-]")
_METADATA_LIMIT = 256
_STATUS = "http.status"
_HEADER = "http.header."


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
                await _problem(send, 400, "Idempotency-Key missing",
                               "this request requires an Idempotency-Key header")
                return
            await self.app(scope, receive, send)
            return
        key = parse_key(raw_key.decode("latin-1"))
        if not key or len(key.encode()) > 255:
            await _problem(send, 400, "Invalid Idempotency-Key",
                           "the Idempotency-Key must be 1-255 bytes")
            return
        try:
            body = await _read_body(receive, self.max_request_bytes)
        except _TooLarge:
            await _problem(send, 413, "Request too large", "the request body is too large")
            return
        framed = _request_identity(scope, body)
        identity: dict[str, Any] = (
            {"payload": framed}
            if len(framed) <= _MAX_SENT_PAYLOAD
            else {"payload": None, "fingerprint": fingerprint_bytes(framed)}
        )

        async def effect(ctx: EffectContext) -> Success | Unknown:
            if ctx.previous_outcome_unknown and self.reconcile_first == "refuse":
                return Unknown("previous_attempt_unknown", "an earlier attempt may have taken effect")
            return await self._run_app(scope, body, ctx)

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
        except ConflictError:
            await _problem(send, 422, "Idempotency-Key reused",
                           "this Idempotency-Key was used with a different request")
            return
        except ResultExpiredError:
            await _problem(send, 422, "Idempotency-Key expired",
                           "this Idempotency-Key's response is no longer kept; use a new key")
            return
        except PendingError as pending:
            await _problem(send, 409, "Request in progress",
                           "a request with this Idempotency-Key is still being processed",
                           retry_after=pending.retry_after)
            return
        except InvalidArgumentError as invalid:
            await _problem(send, 400, "Invalid request", invalid.message)
            return
        except OutcomeUnknownError as unknown:
            if unknown.__cause__ is not None and not isinstance(unknown.__cause__, IdemError):
                raise unknown.__cause__ from None  # the app's own exception
            await _problem(send, 500, "Outcome unknown",
                           "an earlier attempt with this Idempotency-Key may have taken effect")
            return
        except (NeedsReconciliationError, OperationFailedError):
            await _problem(send, 500, "Outcome unknown",
                           "an earlier attempt with this Idempotency-Key may have taken effect")
            return
        except StatusError as error:
            await _problem(send, 503, "Idempotency service unavailable", error.code.name,
                           retry_after=error.retry_after or 1.0)
            return
        await _send_stored(send, result)

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
        headers: list[tuple[bytes, bytes]] = []
        chunks: list[bytes] = []
        size = 0

        async def capture(message: Message) -> None:
            nonlocal status, headers, size
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = [(bytes(k).lower(), bytes(v)) for k, v in message.get("headers", [])]
            elif message["type"] == "http.response.body":
                chunk = bytes(message.get("body", b""))
                size += len(chunk)
                if size > self.max_response_bytes:
                    raise _TooLarge("the response is larger than max_response_bytes")
                chunks.append(chunk)

        await self.app(scope, replay_body, capture)
        content_type = ""
        metadata = {_STATUS: str(status)}
        for name, value in headers:
            text_name, text_value = name.decode("latin-1"), value.decode("latin-1")
            if text_name == "content-type":
                content_type = text_value
            elif text_name in self.keep_headers:
                meta_key = _HEADER + text_name
                if meta_key in metadata:
                    text_value = metadata[meta_key] + ", " + text_value
                if len(meta_key) + len(text_value.encode()) <= _METADATA_LIMIT and len(metadata) < 16:
                    metadata[meta_key] = text_value
        return Success(b"".join(chunks), content_type, metadata)


def parse_key(value: str) -> str:
    """The key of an ``Idempotency-Key`` header: an RFC 8941 sf-string, or a bare token."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


def default_operation(scope: Scope) -> str:
    """``http.<method><path>`` in idemd's operation alphabet, at most 128 characters."""
    name = "http." + str(scope["method"]).lower() + _OPERATION_CHARS.sub("_", str(scope.get("path", "/")))
    if len(name) > 128:
        name = name[:111] + "." + hashlib.sha256(name.encode()).hexdigest()[:16]
    return name


def _request_identity(scope: Scope, body: bytes) -> bytes:
    """What the key must always be used with: method, path, query, content type, body."""
    content_type = next(
        (v for k, v in scope["headers"] if k.lower() == b"content-type"), b""
    )
    head = json.dumps(
        [
            scope["method"].upper(),
            scope.get("path", "/"),
            bytes(scope.get("query_string", b"")).decode("latin-1"),
            bytes(content_type).decode("latin-1"),
        ],
        separators=(",", ":"),
    ).encode()
    return head + b"\n" + body


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


async def _send_stored(send: Send, result: Result) -> None:
    status = int(result.metadata.get(_STATUS, "200"))
    headers = [(b"content-length", str(len(result.body)).encode())]
    if result.content_type:
        headers.append((b"content-type", result.content_type.encode("latin-1")))
    for name, value in result.metadata.items():
        if name.startswith(_HEADER):
            headers.append((name[len(_HEADER):].encode("latin-1"), value.encode("latin-1")))
    if result.replayed:
        headers.append((b"idempotent-replayed", b"true"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": result.body, "more_body": False})


async def _problem(
    send: Send, status: int, title: str, detail: str, *, retry_after: float | None = None
) -> None:
    """An RFC 9457 problem details response."""
    body = json.dumps({"type": "about:blank", "title": title, "status": status, "detail": detail}).encode()
    headers = [
        (b"content-type", b"application/problem+json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if retry_after is not None:
        headers.append((b"retry-after", str(max(1, math.ceil(retry_after))).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
