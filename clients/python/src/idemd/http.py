"""The ``Idempotency-Key`` HTTP mapping, shared by the ASGI (:mod:`idemd.asgi`) and the
WSGI (:mod:`idemd.wsgi`) middleware: how the key is read, what identifies a request,
how a response is stored in and replayed from idemd's result, and which answer each
outcome of ``execute_once`` gets. The middleware only adapt their server interface.

Keys are per caller, as Stripe's are per account and the IETF
draft-ietf-httpapi-idempotency-key-header's per client: the key sent to idemd is
:func:`scoped_key` of the request's principal (by default its ``Authorization``
header) and the header's key, so two callers who pick the same key never share a
stored response. Only a middleware built with ``shared_keys=True`` sends the header's
key as it is, for routes whose callers are one system. Where a caller's credentials
may change between its retries (a refreshed short-lived token), pass a ``principal``
that names the account instead: a retry with other credentials is another caller's.

* no ``Idempotency-Key`` where one is required: 400;
* a key but no principal (and keys not shared): 400;
* the same key with another request (method, path, query, content type, body; or
  with a ``selector``, the fields it selects: docs/api.md, "Request selectors"): 422,
  as the IETF draft says (``conflict_status``; also the answer for a key whose
  response idemd no longer keeps);
* the same key while the first request still runs: 409 with ``Retry-After``
  (``in_progress_status``);
* the same key again: the stored response replayed (status, the headers kept, body),
  with ``Idempotent-Replayed: true``, without calling the app.

Every refusal is an RFC 9457 ``application/problem+json`` body whose ``status`` is the
response's.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, cast

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
from idemd.fingerprint import fingerprint_bytes
from idemd.protocol import Result, Success
from idemd.selector import Selector
from idemd.wire import MAX_PREVIOUS_FINGERPRINTS

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

#: Headers as (lower-case name, value) text pairs.
Headers = list[tuple[str, str]]

App = TypeVar("App")
C = TypeVar("C")
#: What a middleware names the operation from (the ASGI scope, the WSGI environ).
Req = TypeVar("Req")


@dataclass(frozen=True)
class Response:
    status: int
    headers: Headers
    body: bytes


def parse_key(value: str) -> str:
    """The key of an ``Idempotency-Key`` header: an RFC 8941 sf-string, or a bare token."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


#: idemd's bound on a key, in UTF-8 bytes.
MAX_KEY_BYTES = 255
#: What :func:`scoped_key` puts before the header's key: 32 hex digits and a colon.
PRINCIPAL_PREFIX_BYTES = 33


def scoped_key(principal: str, key: str) -> str:
    """The key sent to idemd for ``key`` sent by ``principal``: the first 16 bytes of
    SHA-256 of the principal's UTF-8, in lower-case hex, then ``:``, then the key.
    The principal (a credential, often) never reaches idemd in clear, and every
    idemd client computes the same key: ``scoped_key("Bearer alice", "k")`` is
    ``"9d7cce461e4b2f090a3d686b4ae72d25:k"``."""
    return hashlib.sha256(principal.encode()).hexdigest()[:32] + ":" + key


def valid_key(key: str, max_bytes: int = MAX_KEY_BYTES) -> bool:
    return bool(key) and len(key.encode()) <= max_bytes


def operation_name(method: str, path: str) -> str:
    """``http.<method><path>`` in idemd's operation alphabet, at most 128 characters."""
    name = "http." + method.lower() + _OPERATION_CHARS.sub("_", path or "/")
    if len(name) > 128:
        name = name[:111] + "." + hashlib.sha256(name.encode()).hexdigest()[:16]
    return name


def request_identity(method: str, path: str, query: str, content_type: str, body: bytes) -> dict[str, Any]:
    """``execute_once``'s payload arguments for what the key must always be used with:
    method, path, query, content type, body (fingerprinted when too long to send)."""
    framed = _framed(method, path, query, content_type, body)
    if len(framed) <= _MAX_SENT_PAYLOAD:
        return {"payload": framed}
    return {"payload": None, "fingerprint": fingerprint_bytes(framed)}


def request_fingerprint(method: str, path: str, query: str, content_type: str, body: bytes) -> bytes:
    """The fingerprint idemd keeps for :func:`request_identity` (sent or computed here,
    it is the bytes-mode fingerprint of the same framing)."""
    return fingerprint_bytes(_framed(method, path, query, content_type, body))


def _framed(method: str, path: str, query: str, content_type: str, body: bytes) -> bytes:
    head = json.dumps([method.upper(), path or "/", query, content_type], separators=(",", ":")).encode()
    return head + b"\n" + body


def selected_identity(selector: Selector, body: bytes, headers: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """``execute_once``'s payload arguments for a request whose identity is what
    ``selector`` picks from its JSON body and headers (docs/api.md, "Request
    selectors"); :class:`~idemd.errors.InvalidArgumentError` (answered 400) for a body
    it cannot apply to."""
    return {"payload": None, "fingerprint": selector.fingerprint(body, headers)}


def stored(status: int, headers: Iterable[tuple[str, str]], body: bytes, keep_headers: Sequence[str]) -> Success:
    """The app's whole response as the result idemd keeps: body and content type, the
    status and the kept headers in the metadata (within idemd's metadata limits)."""
    content_type = ""
    metadata = {_STATUS: str(status)}
    for raw_name, value in headers:
        name = raw_name.lower()
        if name == "content-type":
            content_type = value
        elif name in keep_headers:
            meta_key = _HEADER + name
            if meta_key in metadata:
                value = metadata[meta_key] + ", " + value
            if len(meta_key) + len(value.encode()) <= _METADATA_LIMIT and len(metadata) < 16:
                metadata[meta_key] = value
    return Success(body, content_type, metadata)


def replayed(result: Result) -> Response:
    """The stored response, as sent to this request (made now or replayed)."""
    status = int(result.metadata.get(_STATUS, "200"))
    headers: Headers = [("content-length", str(len(result.body)))]
    if result.content_type:
        headers.append(("content-type", result.content_type))
    for name, value in result.metadata.items():
        if name.startswith(_HEADER):
            headers.append((name[len(_HEADER):], value))
    if result.replayed:
        headers.append(("idempotent-replayed", "true"))
    return Response(status, headers, result.body)


def problem(status: int, title: str, detail: str, *, retry_after: float | None = None) -> Response:
    """An RFC 9457 problem details response."""
    body = json.dumps({"type": "about:blank", "title": title, "status": status, "detail": detail}).encode()
    headers: Headers = [("content-type", "application/problem+json"), ("content-length", str(len(body)))]
    if retry_after is not None:
        headers.append(("retry-after", str(max(1, math.ceil(retry_after)))))
    return Response(status, headers, body)


MISSING_KEY = problem(400, "Idempotency-Key missing", "this request requires an Idempotency-Key header")
NO_PRINCIPAL = problem(
    400,
    "Idempotency-Key without a caller",
    "Idempotency-Keys are scoped per caller and no caller (principal) was found for this request: "
    "send it with the caller's credentials",
)
TOO_LARGE = problem(413, "Request too large", "the request body is too large")


def invalid_key(max_bytes: int) -> Response:
    return problem(400, "Invalid Idempotency-Key", f"the Idempotency-Key must be 1-{max_bytes} bytes")


#: The default status of a key used with another request (or expired): the IETF draft's.
DEFAULT_CONFLICT_STATUS = 422
#: The default status of a key whose first request is still running.
DEFAULT_IN_PROGRESS_STATUS = 409


def error_status(name: str, value: object) -> int:
    """``value`` when it is an HTTP error status (an int in 400..599), else a
    ValueError naming the setting ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 400 <= value <= 599:
        raise ValueError(f"{name} must be an HTTP error status, an int in 400..599, not {value!r}")
    return value


def answer_for(
    error: IdemError,
    *,
    conflict_status: int = DEFAULT_CONFLICT_STATUS,
    in_progress_status: int = DEFAULT_IN_PROGRESS_STATUS,
) -> Response:
    """The response to an ``execute_once`` that raised ``error``: ``conflict_status``
    for a key used with another request or expired, ``in_progress_status`` (with
    ``Retry-After``) for a key whose first request still runs. An app's own exception
    (the cause of an OutcomeUnknownError) is re-raised instead."""
    if isinstance(error, ConflictError):
        return problem(conflict_status, "Idempotency-Key reused",
                       "this Idempotency-Key was used with a different request")
    if isinstance(error, ResultExpiredError):
        return problem(conflict_status, "Idempotency-Key expired",
                       "this Idempotency-Key's response is no longer kept; use a new key")
    if isinstance(error, PendingError):
        return problem(in_progress_status, "Request in progress",
                       "a request with this Idempotency-Key is still being processed",
                       retry_after=error.retry_after)
    if isinstance(error, InvalidArgumentError):
        return problem(400, "Invalid request", error.message)
    if (
        isinstance(error, OutcomeUnknownError)
        and error.__cause__ is not None
        and not isinstance(error.__cause__, IdemError)
    ):
        raise error.__cause__ from None  # the app's own exception
    if isinstance(error, (OutcomeUnknownError, NeedsReconciliationError, OperationFailedError)):
        return problem(500, "Outcome unknown", "an earlier attempt with this Idempotency-Key may have taken effect")
    if isinstance(error, StatusError):
        return problem(503, "Idempotency service unavailable", error.code.name, retry_after=error.retry_after or 1.0)
    raise error


def _previous_selectors(given: Iterable[Selector | None]) -> tuple[Selector | None, ...]:
    """A middleware's ``previous_selectors``, an empty selector as None (the whole
    request); ValueError for what the server could not be sent."""
    if isinstance(given, Selector):
        raise ValueError("previous_selectors must be a list of idemd.Selector (or None), not one Selector")
    listed = list(given)
    if len(listed) > MAX_PREVIOUS_FINGERPRINTS:
        raise ValueError(
            f"previous_selectors may name at most {MAX_PREVIOUS_FINGERPRINTS} selectors, not {len(listed)}"
        )
    for earlier in listed:
        if earlier is not None and not isinstance(earlier, Selector):
            raise ValueError(f"previous_selectors must hold idemd.Selector or None, not {earlier!r}")
    return tuple(None if earlier is None or earlier.empty else earlier for earlier in listed)


# ---- what both middleware do, whatever their server interface -------------------------


class TooLarge(Exception):
    """A request or a response larger than the middleware's limit for it."""


class Buffer:
    """A request or response body gathered whole, never past ``limit`` bytes; with the
    status and headers of a response."""

    def __init__(self, limit: int, too_large: str = "") -> None:
        self.limit = limit
        self.too_large = too_large
        self.size = 0
        self.chunks: list[bytes] = []
        self.status = 500
        self.headers: Headers = []

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.limit:
            raise TooLarge(self.too_large)
        self.chunks.append(bytes(chunk))

    def body(self) -> bytes:
        return b"".join(self.chunks)

    def stored(self, keep_headers: Sequence[str]) -> Success:
        """The buffered response as the result idemd keeps (:func:`stored`)."""
        return stored(self.status, self.headers, self.body(), keep_headers)


class Middleware(Generic[App, C, Req]):
    """The options of :class:`idemd.asgi.IdempotencyMiddleware` and
    :class:`idemd.wsgi.IdempotencyMiddleware`, and the decisions they share; each
    adapts its server interface (how the key, the body and the response travel).

    ``conflict_status`` (default 422, the IETF draft's) answers a key used with another
    request, or one whose response is no longer kept; ``in_progress_status`` (default
    409) answers a key whose first request still runs, with ``Retry-After``. Each must
    be an int in 400..599, else the constructor raises ValueError naming it.

    ``selector`` (:class:`~idemd.selector.Selector`): the fields of the JSON body (and
    the headers) that define a request, instead of the whole request; a change outside
    them replays, one inside them conflicts. A body it cannot apply to (not I-JSON, or
    not an object while ``include``/``exclude`` is given) is answered 400.

    ``previous_selectors`` (at most 4; README "Changing the normalisation"): while a
    deployment that changes ``selector`` rolls out, the selectors of the versions being
    replaced (``None``, or an empty selector, for a version without one: the whole
    request). Each request's fingerprint under each of them is sent in
    ``previous_fingerprints``, so that a retry of a request an old version took is
    the same request (replayed, or 409 while it runs), not a conflict. A body a
    previous selector cannot apply to was refused (400) by its version, which so
    holds no operation for it: that selector is skipped. Empty (the default) outside
    such a window."""

    #: The client class: ``client`` is either one, or a function that makes one.
    _client_type: type[Any]

    def __init__(
        self,
        app: App,
        *,
        client: C | Callable[[], C],
        methods: Iterable[str] = ("POST", "PATCH"),
        required: bool = True,
        header: str = "Idempotency-Key",
        operation: Callable[[Req], str] | None = None,
        principal: Callable[[Req], str | None] | None = None,
        shared_keys: bool = False,
        keep_headers: Iterable[str] = DEFAULT_KEEP_HEADERS,
        lease: float = 30.0,
        attempt_duration: float = 300.0,
        pending_wait: float = 0.0,
        max_request_bytes: int = 1 << 20,
        max_response_bytes: int = 1 << 20,
        reconcile_first: Literal["refuse", "run"] = "refuse",
        conflict_status: int = DEFAULT_CONFLICT_STATUS,
        in_progress_status: int = DEFAULT_IN_PROGRESS_STATUS,
        selector: Selector | None = None,
        previous_selectors: Iterable[Selector | None] = (),
    ) -> None:
        self.conflict_status = error_status("conflict_status", conflict_status)
        self.in_progress_status = error_status("in_progress_status", in_progress_status)
        self.app = app
        self._client: C | None = None
        self._make_client: Callable[[], C] | None = None
        if isinstance(client, self._client_type):
            self._client = client
        else:
            self._make_client = cast("Callable[[], C]", client)
        self.methods = {method.upper() for method in methods}
        self.required = required
        self._use_header(header)
        self.operation = operation or self._default_operation
        self.principal = principal or self._default_principal
        self.shared_keys = shared_keys
        #: The longest header key that still fits idemd's bound once scoped.
        self.max_key_bytes = MAX_KEY_BYTES if shared_keys else MAX_KEY_BYTES - PRINCIPAL_PREFIX_BYTES
        self.invalid_key = invalid_key(self.max_key_bytes)
        self.keep_headers = [name.lower() for name in keep_headers]
        self.lease = lease
        self.attempt_duration = attempt_duration
        self.pending_wait = pending_wait
        self.max_request_bytes = max_request_bytes
        self.max_response_bytes = max_response_bytes
        self.reconcile_first = reconcile_first
        if selector is not None and not isinstance(selector, Selector):
            raise ValueError(f"selector must be an idemd.Selector, not {selector!r}")
        #: The fields that define a request; None (or an empty one): the whole request.
        self.selector = None if selector is None or selector.empty else selector
        #: The normalisations of the versions being replaced (None: the whole request).
        self.previous_selectors = _previous_selectors(previous_selectors)
        #: The headers some selector picks (read from a request only when needed).
        self.selected_headers = tuple(
            dict.fromkeys(
                name.lower()
                for chosen in (self.selector, *self.previous_selectors)
                if chosen is not None
                for name in chosen.headers
            )
        )

    def _use_header(self, header: str) -> None:
        """Keeps the key's header name in the form the server interface gives it."""
        raise NotImplementedError

    def _default_operation(self, request: Req) -> str:
        raise NotImplementedError

    def _default_principal(self, request: Req) -> str | None:
        """The request's ``Authorization`` header, None when it has none."""
        raise NotImplementedError

    def client(self) -> C:
        if self._client is None:
            assert self._make_client is not None
            self._client = self._make_client()
        return self._client

    def admit(self, method: str, raw_key: str | None, request: Req) -> str | Response | None:
        """The key to send to idemd (scoped to the caller unless keys are shared); or
        the answer to send instead (400); or None when the app runs unguarded (a
        method not covered, or no key where none is required)."""
        if method.upper() not in self.methods:
            return None
        if raw_key is None:
            return MISSING_KEY if self.required else None
        key = parse_key(raw_key)
        if not valid_key(key, self.max_key_bytes):
            return self.invalid_key
        if self.shared_keys:
            return key
        principal = self.principal(request)
        if not principal:
            return NO_PRINCIPAL
        return scoped_key(principal, key)

    def execute_options(
        self,
        method: str,
        path: str,
        query: str,
        content_type: str,
        body: bytes,
        headers: Callable[[], Headers] = list,
    ) -> dict[str, Any]:
        """``execute_once``'s keyword arguments for this request (its identity included:
        with a ``selector``, what it picks from the JSON body and ``headers()``, else
        method, path, query, content type and body). Raises
        :class:`~idemd.errors.InvalidArgumentError` for a body the selector cannot apply to.
        After an earlier attempt whose outcome is unknown, the app runs again only when
        ``reconcile_first="run"`` declares that its providers deduplicate by
        ``ctx.operation_id``; otherwise the attempt declines and the answer is 500."""
        identity = (
            selected_identity(self.selector, body, headers())
            if self.selector is not None
            else request_identity(method, path, query, content_type, body)
        )
        # What idemd stores for this request; a previous one equal to it adds nothing.
        current = identity.get("fingerprint") or request_fingerprint(method, path, query, content_type, body)
        previous: list[bytes] = []
        for earlier in self.previous_selectors:
            if earlier is None:
                fingerprint = request_fingerprint(method, path, query, content_type, body)
            else:
                try:
                    fingerprint = earlier.fingerprint(body, headers())
                except InvalidArgumentError:
                    continue  # the earlier version answered 400: it holds no operation for this body
            if fingerprint != current and fingerprint not in previous:
                previous.append(fingerprint)
        return {
            "lease": self.lease,
            "attempt_duration": self.attempt_duration,
            "deadline": self.pending_wait,
            "provider_deduplicates": self.reconcile_first == "run",
            "previous_fingerprints": previous,
            **identity,
        }

    def answer(self, error: IdemError) -> Response:
        """The response to an ``execute_once`` that raised ``error`` (:func:`answer_for`
        with this middleware's statuses)."""
        return answer_for(error, conflict_status=self.conflict_status, in_progress_status=self.in_progress_status)

    def request_buffer(self) -> Buffer:
        return Buffer(self.max_request_bytes, "the request body is larger than max_request_bytes")

    def response_buffer(self) -> Buffer:
        return Buffer(self.max_response_bytes, "the response is larger than max_response_bytes")
