"""Item: the Idempotency-Key WSGI middleware: a plain WSGI app served by wsgiref (one
thread per request) against a real idemd on each store, called over HTTP with httpx."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import httpx
import pytest

import idemd
import idemd.sync
from idemd.http import scoped_key
from idemd.proto import pb
from idemd.wsgi import CONTEXT_KEY, IdempotencyMiddleware, default_operation, default_principal

from conftest import Server, key


class Shop:
    """A WSGI app that counts the orders it creates."""

    def __init__(self) -> None:
        self.orders: list[dict[str, Any]] = []
        self.hold: threading.Event | None = None
        self.entered = threading.Event()
        self.ids = itertools.count(1)
        self.contexts: list[Any] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        method, path = environ["REQUEST_METHOD"], environ["PATH_INFO"]
        if method == "GET":
            start_response("200 OK", [("Content-Type", "application/json")])
            return [json.dumps(self.orders).encode()]
        self.contexts.append(environ.get(CONTEXT_KEY))
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = json.loads(environ["wsgi.input"].read(length))
        if path == "/crash":
            self.orders.append({"id": "crashed"})
            raise RuntimeError("the app broke after its effect")
        self.entered.set()
        if self.hold is not None:
            self.hold.wait(10)
        order = {"id": f"ord_{next(self.ids)}", **body}
        self.orders.append(order)
        start_response("201 Created", [
            ("Content-Type", "application/json"), ("Location", f"/orders/{order['id']}"), ("X-Trace", "t1"),
        ])
        # Streamed in two pieces: the middleware stores the whole body.
        data = json.dumps(order).encode()
        return iter([data[:5], data[5:]])


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


ALICE = {"Authorization": "Bearer alice"}
BOB = {"Authorization": "Bearer bob"}


@contextmanager
def serving(app: Any, caller: dict[str, str] | None = None) -> Iterator[httpx.Client]:
    """``app`` on a threaded server, and an HTTP client sending Alice's credentials
    unless told otherwise."""
    server = make_server("127.0.0.1", 0, app, server_class=_ThreadingServer, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.server_port}", timeout=20,
                          headers=ALICE if caller is None else caller) as web:
            yield web
    finally:
        server.shutdown()
        server.server_close()


def idem_key() -> dict[str, str]:
    return {"Idempotency-Key": f'"{key()}"'}


def test_replays_the_stored_response_without_calling_the_app(sync_client: idemd.sync.Client) -> None:
    shop = Shop()
    with serving(IdempotencyMiddleware(shop, client=sync_client)) as web:
        headers = idem_key()
        first = web.post("/orders", json={"sku": "a"}, headers=headers)
        again = web.post("/orders", json={"sku": "a"}, headers=headers)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() == {"id": "ord_1", "sku": "a"} and len(shop.orders) == 1
    assert again.headers["location"] == "/orders/ord_1" and again.headers["content-type"] == "application/json"
    assert again.headers["idempotent-replayed"] == "true" and "idempotent-replayed" not in first.headers
    assert "x-trace" not in again.headers  # not in keep_headers
    ctx = shop.contexts[0]
    assert isinstance(ctx, idemd.EffectContext) and not ctx.previous_outcome_unknown


def test_missing_key_is_400_where_required_and_passes_where_not(sync_client: idemd.sync.Client) -> None:
    shop = Shop()
    with serving(IdempotencyMiddleware(shop, client=sync_client)) as web:
        refused = web.post("/orders", json={"sku": "a"})
        assert refused.status_code == 400 and refused.headers["content-type"] == "application/problem+json"
        assert web.post("/orders", json={"sku": "a"}, headers={"Idempotency-Key": '""'}).status_code == 400
        assert web.get("/orders").status_code == 200  # GET: no key needed
    assert shop.orders == []
    with serving(IdempotencyMiddleware(shop, client=sync_client, required=False)) as web:
        assert web.post("/orders", json={"sku": "a"}).status_code == 201
    assert len(shop.orders) == 1


def test_same_key_other_body_is_422(sync_client: idemd.sync.Client) -> None:
    shop = Shop()
    with serving(IdempotencyMiddleware(shop, client=sync_client)) as web:
        headers = idem_key()
        assert web.post("/orders", json={"sku": "a"}, headers=headers).status_code == 201
        changed = web.post("/orders", json={"sku": "b"}, headers=headers)
        other_query = web.post("/orders?x=1", json={"sku": "a"}, headers=headers)
    assert changed.status_code == other_query.status_code == 422 and len(shop.orders) == 1


def test_still_in_progress_is_409(sync_client: idemd.sync.Client) -> None:
    shop = Shop()
    shop.hold = threading.Event()
    done: list[httpx.Response] = []
    with serving(IdempotencyMiddleware(shop, client=sync_client)) as web:
        headers = idem_key()
        first = threading.Thread(target=lambda: done.append(web.post("/orders", json={"sku": "a"}, headers=headers)))
        first.start()
        assert shop.entered.wait(10)
        busy = web.post("/orders", json={"sku": "a"}, headers=headers)
        shop.hold.set()
        first.join(20)
    assert busy.status_code == 409 and int(busy.headers["retry-after"]) >= 1
    assert done[0].status_code == 201 and len(shop.orders) == 1


def test_configured_statuses_for_a_conflict_and_a_request_in_progress(sync_client: idemd.sync.Client) -> None:
    """Issue 21: ``conflict_status`` and ``in_progress_status`` replace 422 and 409,
    with the same problem+json body (its ``status`` the response's) and Retry-After."""
    shop = Shop()
    shop.hold = threading.Event()
    done: list[httpx.Response] = []
    middleware = IdempotencyMiddleware(shop, client=sync_client, conflict_status=409, in_progress_status=429)
    with serving(middleware) as web:
        headers = idem_key()
        first = threading.Thread(target=lambda: done.append(web.post("/orders", json={"sku": "a"}, headers=headers)))
        first.start()
        assert shop.entered.wait(10)
        busy = web.post("/orders", json={"sku": "a"}, headers=headers)
        shop.hold.set()
        first.join(20)
        changed = web.post("/orders", json={"sku": "b"}, headers=headers)
    assert done[0].status_code == 201 and len(shop.orders) == 1
    assert busy.status_code == 429 and int(busy.headers["retry-after"]) >= 1
    assert busy.headers["content-type"] == "application/problem+json"
    assert busy.json() == {"type": "about:blank", "title": "Request in progress", "status": 429,
                           "detail": "a request with this Idempotency-Key is still being processed"}
    assert changed.status_code == 409 and "retry-after" not in changed.headers
    assert changed.headers["content-type"] == "application/problem+json"
    assert changed.json() == {"type": "about:blank", "title": "Idempotency-Key reused", "status": 409,
                              "detail": "this Idempotency-Key was used with a different request"}


@pytest.mark.parametrize("setting", ["conflict_status", "in_progress_status"])
@pytest.mark.parametrize("value", [399, 600, 200, True, "409", 409.0, None])
def test_an_out_of_range_status_is_refused_at_construction(setting: str, value: Any) -> None:
    shop = Shop()
    options: dict[str, Any] = {setting: value}
    with pytest.raises(ValueError, match=f"^{setting} must be an HTTP error status, an int in 400..599"):
        IdempotencyMiddleware(shop, client=lambda: idemd.sync.Client("127.0.0.1:1", "t"), **options)
    for status in (400, 599):
        valid: dict[str, Any] = {setting: status}
        middleware = IdempotencyMiddleware(shop, client=lambda: idemd.sync.Client("127.0.0.1:1", "t"), **valid)
        assert getattr(middleware, setting) == status


def test_an_app_that_raises_is_unknown_and_never_rerun(server: Server) -> None:
    shop = Shop()
    middleware = IdempotencyMiddleware(shop, client=lambda: idemd.SyncClient(server.addr, server.token))  # type: ignore[attr-defined]
    environ_base = {"REQUEST_METHOD": "POST", "PATH_INFO": "/crash", "CONTENT_TYPE": "application/json",
                    "HTTP_IDEMPOTENCY_KEY": key(), "HTTP_AUTHORIZATION": "Bearer alice"}
    statuses: list[str] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        statuses.append(status)
        return lambda data: None

    import io

    with pytest.raises(RuntimeError, match="broke after its effect"):
        middleware({**environ_base, "wsgi.input": io.BytesIO(b"{}"), "CONTENT_LENGTH": "2"}, start_response)
    retried = b"".join(middleware({**environ_base, "wsgi.input": io.BytesIO(b"{}"), "CONTENT_LENGTH": "2"},
                                  start_response))
    assert statuses == ["500 Internal Server Error"] and json.loads(retried)["title"] == "Outcome unknown"
    assert shop.orders == [{"id": "crashed"}]
    # The retry declined (the app never ran), keeping the crashed attempt's doubt.
    sent_key = scoped_key("Bearer alice", environ_base["HTTP_IDEMPOTENCY_KEY"])
    found = middleware.client().lookup(operation="http.post/crash", key=sent_key, include_history=True)
    events = [(entry.event, entry.detail) for entry in found.history if entry.event != "RENEWED"]
    assert [event for event, _ in events] == ["CLAIMED", "OUTCOME_UNKNOWN", "TAKEN_OVER", "OUTCOME_UNKNOWN"], events
    assert events[1][1] == "effect_raised" and events[3][1] == "not_started", events
    middleware.client().close()


def test_operation_names() -> None:
    assert default_operation({"REQUEST_METHOD": "POST", "PATH_INFO": "/orders/{x} y"}) == "http.post/orders/_x__y"
    mounted = {"REQUEST_METHOD": "POST", "SCRIPT_NAME": "/shop", "PATH_INFO": "/o"}
    assert default_operation(mounted) == "http.post/shop/o"
    assert len(default_operation({"REQUEST_METHOD": "POST", "PATH_INFO": "/" + "a" * 300})) == 128


def test_keys_are_per_caller(sync_client: idemd.sync.Client) -> None:
    """Issue 17 item 2: Alice and Bob send the same key and body; each gets an order of
    their own and their own response, and Alice re-sending gets hers replayed."""
    shop = Shop()
    headers = idem_key()
    middleware = IdempotencyMiddleware(shop, client=sync_client)
    with serving(middleware, ALICE) as alice, serving(middleware, BOB) as bob:
        alices = alice.post("/orders", json={"sku": "a"}, headers=headers)
        bobs = bob.post("/orders", json={"sku": "a"}, headers=headers)
        again = alice.post("/orders", json={"sku": "a"}, headers=headers)
    assert alices.status_code == bobs.status_code == again.status_code == 201
    assert len(shop.orders) == 2
    assert alices.json()["id"] != bobs.json()["id"] and "idempotent-replayed" not in bobs.headers
    assert again.json() == alices.json() and again.headers["idempotent-replayed"] == "true"
    k = headers["Idempotency-Key"].strip('"')
    sent = sync_client.lookup(operation="http.post/orders", key="9d7cce461e4b2f090a3d686b4ae72d25:" + k)
    assert sent.operation.state == pb.OPERATION_STATE_SUCCEEDED


def test_a_key_without_a_caller_is_refused_unless_keys_are_shared(sync_client: idemd.sync.Client) -> None:
    shop = Shop()
    headers = idem_key()
    with serving(IdempotencyMiddleware(shop, client=sync_client), caller={}) as anonymous:
        refused = anonymous.post("/orders", json={"sku": "a"}, headers=headers)
        too_long = anonymous.post("/orders", json={"sku": "a"},
                                  headers={"Idempotency-Key": "k" * 223, **ALICE})
    assert refused.status_code == 400 and refused.headers["content-type"] == "application/problem+json"
    assert "scoped per caller" in refused.json()["detail"] and shop.orders == []
    assert too_long.status_code == 400 and "1-222 bytes" in too_long.json()["detail"]
    shared = IdempotencyMiddleware(shop, client=sync_client, shared_keys=True)
    with serving(shared, caller={}) as anonymous, serving(shared, BOB) as bob:
        served = anonymous.post("/orders", json={"sku": "a"}, headers=headers)
        replayed = bob.post("/orders", json={"sku": "a"}, headers=headers)
    assert served.status_code == replayed.status_code == 201 and len(shop.orders) == 1
    assert replayed.json() == served.json() and replayed.headers["idempotent-replayed"] == "true"


def test_default_principal_is_the_authorization_header() -> None:
    assert default_principal({"HTTP_AUTHORIZATION": "Bearer alice"}) == "Bearer alice"
    assert default_principal({}) is None
    assert scoped_key("Bearer alice", "k") == "9d7cce461e4b2f090a3d686b4ae72d25:k"
