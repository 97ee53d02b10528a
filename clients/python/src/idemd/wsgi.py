"""WSGI middleware for the IETF ``Idempotency-Key`` header (Flask, Django, any WSGI app),
backed by idemd through the blocking :func:`idemd.sync.execute_once`.

The same contract as :mod:`idemd.asgi` (the mapping is :mod:`idemd.http`, shared):
for the configured methods (POST and PATCH by default), no key where one is required
is 400; keys are per caller (``principal(environ)``, by default the ``Authorization``
header, ``HTTP_AUTHORIZATION``), and a key without a caller is 400 unless
``shared_keys=True``; the same key with another request (method, path, query,
content type, body) is 422 (``conflict_status``); the same key while the first
request still runs is 409 with ``Retry-After`` (``in_progress_status``); the same key
again replays the stored status, the kept headers and the body, with
``Idempotent-Replayed: true``, without calling the app. The app's response is
buffered whole and stored before it is sent.

The app runs on the request's own thread (its thread-locals, database connections and
transactions are its own), with ``environ["idemd.idempotency"]`` set to the
:class:`~idemd.protocol.EffectContext` (``operation_id`` for providers' idempotency
keys, ``cancelled`` set at the attempt deadline). An app that raises leaves the
outcome UNKNOWN and the exception propagates; a retry of that key never runs the app
(it declines, Fail NOT_STARTED) and is answered 500, unless ``reconcile_first="run"``
declares that the app's providers deduplicate by ``operation_id``.

Some servers keep the ``Authorization`` header from the app (Apache's mod_wsgi
unless ``WSGIPassAuthorization On``): then pass a ``principal`` that names the caller
from what the server does pass (``REMOTE_USER``, a session).

    app.wsgi_app = IdempotencyMiddleware(app.wsgi_app, client=idemd.SyncClient(addr, token))  # Flask
    application = IdempotencyMiddleware(get_wsgi_application(), client=...)            # Django
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator, Mapping
from http import HTTPStatus  # the standard library's, not idemd.http
from typing import Any, Protocol

from idemd import http
from idemd.errors import IdemError
from idemd.protocol import EffectContext, Success
from idemd.sync import Client, execute_once

Environ = dict[str, Any]
ResponseHeaders = list[tuple[str, str]]


class StartResponse(Protocol):
    def __call__(
        self, status: str, headers: ResponseHeaders, exc_info: Any = None, /
    ) -> Callable[[bytes], object]: ...


WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]

#: Where the app finds the attempt it runs in.
CONTEXT_KEY = "idemd.idempotency"

__all__ = ["CONTEXT_KEY", "IdempotencyMiddleware", "default_operation", "default_principal"]


class IdempotencyMiddleware(http.Middleware[WSGIApp, Client, Mapping[str, Any]]):
    """``client``: a blocking :class:`idemd.sync.Client` (shared by the server's
    threads), or a function that makes one on first use. Other options as
    :class:`idemd.asgi.IdempotencyMiddleware`."""

    _client_type = Client

    def _use_header(self, header: str) -> None:
        self.environ_key = "HTTP_" + header.upper().replace("-", "_")

    def _default_operation(self, request: Mapping[str, Any]) -> str:
        return default_operation(request)

    def _default_principal(self, request: Mapping[str, Any]) -> str | None:
        return default_principal(request)

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        raw_key = environ.get(self.environ_key)
        admitted = self.admit(method, None if raw_key is None else str(raw_key), environ)
        if admitted is None:
            return self.app(environ, start_response)
        if isinstance(admitted, http.Response):
            return _send(start_response, admitted)
        try:
            body = _read_body(environ, self.max_request_bytes)
        except http.TooLarge:
            return _send(start_response, http.TOO_LARGE)
        try:
            options = self.execute_options(
                method,
                _path(environ),
                str(environ.get("QUERY_STRING", "")),
                str(environ.get("CONTENT_TYPE", "")),
                body,
                lambda: self._selected_headers(environ),
            )
        except IdemError as error:  # a body the selector cannot apply to: 400
            return _send(start_response, self.answer(error))

        def effect(ctx: EffectContext) -> Success:
            return self._run_app(environ, body, ctx)

        try:
            result = execute_once(self.client(), self.operation(environ), admitted, effect=effect, **options)
        except IdemError as error:
            return _send(start_response, self.answer(error))
        return _send(start_response, http.replayed(result))

    def _selected_headers(self, environ: Environ) -> http.Headers:
        """The headers the selectors pick (the current one and the previous ones), as
        WSGI gives them: one value per name, so a header sent more than once is as the
        server joined it (wsgiref joins with ``,``, not
        the ``", "`` of docs/api.md), the one place a WSGI app may differ."""
        headers: http.Headers = []
        for name in self.selected_headers:
            key = name.upper().replace("-", "_")
            value = environ.get(key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else "HTTP_" + key)
            if value is not None:
                headers.append((name.lower(), str(value)))
        return headers

    def _run_app(self, environ: Environ, body: bytes, ctx: EffectContext) -> Success:
        inner = dict(environ)
        inner["wsgi.input"] = io.BytesIO(body)
        inner["CONTENT_LENGTH"] = str(len(body))
        inner[CONTEXT_KEY] = ctx
        response = self.response_buffer()

        def capture(
            status_line: str, response_headers: ResponseHeaders, exc_info: Any = None, /
        ) -> Callable[[bytes], object]:
            # Nothing is sent before the app is done, so a later call (with exc_info)
            # simply replaces the response.
            response.status = int(status_line.split(" ", 1)[0])
            response.headers = list(response_headers)
            return response.add

        iterable = self.app(inner, capture)
        try:
            for chunk in iterable:
                response.add(chunk)
        finally:
            close = getattr(iterable, "close", None)
            if callable(close):
                close()
        return response.stored(self.keep_headers)


def default_operation(environ: Mapping[str, Any]) -> str:
    """``http.<method><path>`` in idemd's operation alphabet, at most 128 characters."""
    return http.operation_name(str(environ.get("REQUEST_METHOD", "GET")), _path(environ))


def default_principal(environ: Mapping[str, Any]) -> str | None:
    """The request's ``Authorization`` header, None when absent."""
    value = environ.get("HTTP_AUTHORIZATION")
    return None if value is None else str(value)


def _path(environ: Mapping[str, Any]) -> str:
    return (str(environ.get("SCRIPT_NAME", "")) + str(environ.get("PATH_INFO", ""))) or "/"


def _read_body(environ: Mapping[str, Any], limit: int) -> bytes:
    stream = environ.get("wsgi.input")
    if stream is None:
        return b""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > limit:
        raise http.TooLarge()
    if not length and not environ.get("wsgi.input_terminated"):
        return b""  # PEP 3333: no length, no body (unless the server ends the stream)
    # Without a length (chunked, ended by the server), read to the end, never past the limit.
    body: bytes = stream.read(length) if length else stream.read(limit + 1)
    if len(body) > limit:
        raise http.TooLarge()
    return body


def _send(start_response: StartResponse, response: http.Response) -> Iterator[bytes]:
    try:
        reason = HTTPStatus(response.status).phrase
    except ValueError:
        reason = ""
    start_response(f"{response.status} {reason}".rstrip(), list(response.headers))
    return iter([response.body])
