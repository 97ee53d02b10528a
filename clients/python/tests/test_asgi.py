"""Item: the Idempotency-Key ASGI middleware, with Starlette apps against a real idemd."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

import idemd
from idemd.asgi import IdempotencyMiddleware, default_operation, default_principal, parse_key, scoped_key
from idemd.proto import pb

from conftest import Server, key


class Shop:
    """A Starlette app that counts the orders it creates."""

    def __init__(self) -> None:
        self.orders: list[dict[str, Any]] = []
        self.hold: asyncio.Event | None = None
        self.entered = asyncio.Event()
        self.ids = itertools.count(1)

    async def create(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.entered.set()
        if self.hold is not None:
            await self.hold.wait()
        order = {"id": f"ord_{next(self.ids)}", **body}
        self.orders.append(order)
        return JSONResponse(order, status_code=201, headers={"Location": f"/orders/{order['id']}", "X-Trace": "t1"})

    async def listing(self, request: Request) -> JSONResponse:
        return JSONResponse(self.orders)

    async def crash(self, request: Request) -> PlainTextResponse:
        self.orders.append({"id": "crashed"})
        raise RuntimeError("the app broke after its effect")

    def app(self, client: Any, **options: Any) -> Starlette:
        app = Starlette(routes=[
            Route("/orders", self.create, methods=["POST"]),
            Route("/orders", self.listing, methods=["GET"]),
            Route("/crash", self.crash, methods=["POST"]),
        ])
        app.add_middleware(IdempotencyMiddleware, client=client, **options)  # type: ignore[arg-type]
        return app


ALICE = {"Authorization": "Bearer alice"}
BOB = {"Authorization": "Bearer bob"}


def http(app: Starlette, caller: dict[str, str] | None = None) -> httpx.AsyncClient:
    """An HTTP client of ``app``, sending Alice's credentials unless told otherwise."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://shop",
                             headers=ALICE if caller is None else caller)


def idem_key() -> dict[str, str]:
    return {"Idempotency-Key": f'"{key()}"'}


async def test_replays_status_kept_headers_and_body(client: idemd.Client) -> None:
    shop = Shop()
    async with http(shop.app(client)) as web:
        headers = idem_key()
        first = await web.post("/orders", json={"sku": "a", "qty": 1}, headers=headers)
        again = await web.post("/orders", json={"sku": "a", "qty": 1}, headers=headers)
    assert first.status_code == 201 and again.status_code == 201
    assert again.json() == first.json() and len(shop.orders) == 1
    assert again.headers["location"] == first.headers["location"] == "/orders/ord_1"
    assert again.headers["content-type"] == "application/json"
    assert again.headers["idempotent-replayed"] == "true" and "idempotent-replayed" not in first.headers
    assert "x-trace" not in again.headers  # not in keep_headers


async def test_missing_key_is_400_where_required_and_passes_where_not(client: idemd.Client) -> None:
    shop = Shop()
    async with http(shop.app(client)) as web:
        refused = await web.post("/orders", json={"sku": "a"})
        assert refused.status_code == 400 and refused.headers["content-type"] == "application/problem+json"
        assert (await web.post("/orders", json={"sku": "a"}, headers={"Idempotency-Key": '""'})).status_code == 400
    assert shop.orders == []
    async with http(shop.app(client, required=False)) as web:
        assert (await web.post("/orders", json={"sku": "a"})).status_code == 201
    assert len(shop.orders) == 1


async def test_same_key_other_body_is_422(client: idemd.Client) -> None:
    shop = Shop()
    async with http(shop.app(client)) as web:
        headers = idem_key()
        assert (await web.post("/orders", json={"sku": "a"}, headers=headers)).status_code == 201
        changed = await web.post("/orders", json={"sku": "b"}, headers=headers)
    assert changed.status_code == 422 and len(shop.orders) == 1


async def test_still_in_progress_is_409(client: idemd.Client) -> None:
    shop = Shop()
    shop.hold = asyncio.Event()
    async with http(shop.app(client)) as web:
        headers = idem_key()
        first = asyncio.create_task(web.post("/orders", json={"sku": "a"}, headers=headers))
        await shop.entered.wait()
        busy = await web.post("/orders", json={"sku": "a"}, headers=headers)
        shop.hold.set()
        done = await first
    assert busy.status_code == 409 and int(busy.headers["retry-after"]) >= 1
    assert done.status_code == 201 and len(shop.orders) == 1


async def test_configured_statuses_for_a_conflict_and_a_request_in_progress(client: idemd.Client) -> None:
    """Issue 21: ``conflict_status`` and ``in_progress_status`` replace 422 and 409,
    with the same problem+json body (its ``status`` the response's) and Retry-After."""
    shop = Shop()
    shop.hold = asyncio.Event()
    async with http(shop.app(client, conflict_status=409, in_progress_status=429)) as web:
        headers = idem_key()
        first = asyncio.create_task(web.post("/orders", json={"sku": "a"}, headers=headers))
        await shop.entered.wait()
        busy = await web.post("/orders", json={"sku": "a"}, headers=headers)
        shop.hold.set()
        done = await first
        changed = await web.post("/orders", json={"sku": "b"}, headers=headers)
    assert done.status_code == 201 and len(shop.orders) == 1
    assert busy.status_code == 429 and int(busy.headers["retry-after"]) >= 1
    assert busy.headers["content-type"] == "application/problem+json"
    assert busy.json() == {"type": "about:blank", "title": "Request in progress", "status": 429,
                           "detail": "a request with this Idempotency-Key is still being processed"}
    assert changed.status_code == 409 and "retry-after" not in changed.headers
    assert changed.headers["content-type"] == "application/problem+json"
    assert changed.json() == {"type": "about:blank", "title": "Idempotency-Key reused", "status": 409,
                              "detail": "this Idempotency-Key was used with a different request"}


@pytest.mark.parametrize("setting", ["conflict_status", "in_progress_status"])
@pytest.mark.parametrize("value", [399, 600, 200, -422, True, "422", 422.0, None])
def test_an_out_of_range_status_is_refused_at_construction(setting: str, value: Any) -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("never called")

    options: dict[str, Any] = {setting: value}
    with pytest.raises(ValueError, match=f"^{setting} must be an HTTP error status, an int in 400..599"):
        IdempotencyMiddleware(app, client=lambda: idemd.Client("127.0.0.1:1", "t"), **options)
    for status in (400, 599):
        valid: dict[str, Any] = {setting: status}
        middleware = IdempotencyMiddleware(app, client=lambda: idemd.Client("127.0.0.1:1", "t"), **valid)
        assert getattr(middleware, setting) == status


async def test_only_configured_methods(client: idemd.Client) -> None:
    shop = Shop()
    async with http(shop.app(client)) as web:
        assert (await web.get("/orders")).status_code == 200  # GET: no key needed
    async with http(shop.app(client, methods=["PATCH"])) as web:
        assert (await web.post("/orders", json={"sku": "a"})).status_code == 201
        assert (await web.post("/orders", json={"sku": "a"})).status_code == 201
    assert len(shop.orders) == 2


async def test_an_app_that_raises_is_unknown_and_never_rerun(client: idemd.Client) -> None:
    shop = Shop()
    app = shop.app(client)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
                                 base_url="http://shop", headers=ALICE) as web:
        headers = idem_key()
        crashed = await web.post("/crash", json={}, headers=headers)
        retried = await web.post("/crash", json={}, headers=headers)
    assert crashed.status_code == 500 and retried.status_code == 500
    assert retried.headers["content-type"] == "application/problem+json"
    assert shop.orders == [{"id": "crashed"}]
    # The retry declined (the app never ran), keeping the crashed attempt's doubt.
    sent_key = scoped_key("Bearer alice", parse_key(headers["Idempotency-Key"]))
    found = await client.lookup(operation="http.post/crash", key=sent_key, include_history=True)
    events = [(entry.event, entry.detail) for entry in found.history if entry.event != "RENEWED"]
    assert [event for event, _ in events] == ["CLAIMED", "OUTCOME_UNKNOWN", "TAKEN_OVER", "OUTCOME_UNKNOWN"], events
    assert events[1][1] == "effect_raised" and events[3][1] == "not_started", events


async def test_reconcile_first_run_declares_deduplication_and_reruns_the_app(client: idemd.Client) -> None:
    """``reconcile_first="run"``: the app's providers deduplicate by the operation_id
    it is given, so after a crash the retry runs the app again, told so."""
    seen: list[Any] = []

    async def create(request: Request) -> JSONResponse:
        ctx = request.scope["state"]["idempotency"]
        seen.append(ctx)
        if len(seen) == 1:
            raise RuntimeError("the app broke after its effect")
        return JSONResponse({"reference": ctx.operation_id}, status_code=201)

    app = Starlette(routes=[Route("/orders", create, methods=["POST"])])
    app.add_middleware(IdempotencyMiddleware, client=client, reconcile_first="run")  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
                                 base_url="http://shop", headers=ALICE) as web:
        headers = idem_key()
        crashed = await web.post("/orders", json={}, headers=headers)
        retried = await web.post("/orders", json={}, headers=headers)
    assert crashed.status_code == 500 and retried.status_code == 201
    assert [ctx.previous_outcome_unknown for ctx in seen] == [False, True]
    assert retried.json() == {"reference": seen[0].operation_id}


def test_with_starlettes_test_client(server: Server) -> None:
    """TestClient runs the app on a loop of its own: the middleware makes its idemd
    client there."""
    shop = Shop()
    app = shop.app(lambda: idemd.Client(server.addr, server.token))  # type: ignore[attr-defined]
    with TestClient(app, headers=ALICE) as web:
        headers = idem_key()
        first = web.post("/orders", json={"sku": "z"}, headers=headers)
        again = web.post("/orders", json={"sku": "z"}, headers=headers)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and len(shop.orders) == 1


def test_key_and_operation_forms() -> None:
    assert parse_key('"8e03978e-40d5-43e8-bc93-6894a57f9324"') == "8e03978e-40d5-43e8-bc93-6894a57f9324"
    assert parse_key('"a\\"b"') == 'a"b' and parse_key("bare") == "bare"
    assert default_operation({"method": "POST", "path": "/orders/{x} y"}) == "http.post/orders/_x__y"
    assert len(default_operation({"method": "POST", "path": "/" + "a" * 300})) == 128


async def test_keys_are_per_caller(client: idemd.Client) -> None:
    """Issue 17 item 2: Alice and Bob send the same key and body; each gets an order of
    their own and their own response, and Alice re-sending gets hers replayed."""
    shop = Shop()
    headers = idem_key()
    app = shop.app(client)
    async with http(app, ALICE) as alice, http(app, BOB) as bob:
        alices = await alice.post("/orders", json={"sku": "a"}, headers=headers)
        bobs = await bob.post("/orders", json={"sku": "a"}, headers=headers)
        again = await alice.post("/orders", json={"sku": "a"}, headers=headers)
    assert alices.status_code == bobs.status_code == again.status_code == 201
    assert len(shop.orders) == 2
    assert alices.json()["id"] != bobs.json()["id"] and "idempotent-replayed" not in bobs.headers
    assert again.json() == alices.json() and again.headers["idempotent-replayed"] == "true"


async def test_a_key_without_a_caller_is_refused_unless_keys_are_shared(client: idemd.Client) -> None:
    shop = Shop()
    headers = idem_key()
    async with http(shop.app(client), caller={}) as anonymous:
        refused = await anonymous.post("/orders", json={"sku": "a"}, headers=headers)
    assert refused.status_code == 400 and refused.headers["content-type"] == "application/problem+json"
    problem = refused.json()
    assert problem["title"] == "Idempotency-Key without a caller" and "scoped per caller" in problem["detail"]
    assert shop.orders == []
    # Shared keys: one key space for every caller of the route, the key sent as it is.
    async with http(shop.app(client, shared_keys=True), caller={}) as anonymous, \
            http(shop.app(client, shared_keys=True), BOB) as bob:
        served = await anonymous.post("/orders", json={"sku": "a"}, headers=headers)
        shared = await bob.post("/orders", json={"sku": "a"}, headers=headers)
    assert served.status_code == shared.status_code == 201 and len(shop.orders) == 1
    assert shared.json() == served.json() and shared.headers["idempotent-replayed"] == "true"
    found = await client.lookup(operation="http.post/orders", key=parse_key(headers["Idempotency-Key"]))
    assert found.operation.state == pb.OPERATION_STATE_SUCCEEDED


async def test_a_principal_function_names_the_caller(client: idemd.Client) -> None:
    shop = Shop()

    def tenant_user(scope: Any) -> str | None:
        return dict(scope["headers"]).get(b"x-user", b"").decode() or None

    app = shop.app(client, principal=tenant_user)
    headers = idem_key()
    async with http(app, {"X-User": "u1"}) as u1, http(app, {"X-User": "u2"}) as u2, http(app) as alice:
        assert (await u1.post("/orders", json={"sku": "a"}, headers=headers)).status_code == 201
        assert (await u2.post("/orders", json={"sku": "a"}, headers=headers)).status_code == 201
        # Credentials alone name no caller for this function.
        assert (await alice.post("/orders", json={"sku": "a"}, headers=headers)).status_code == 400
    assert len(shop.orders) == 2


def test_the_scoped_key_is_the_documented_formula() -> None:
    """hex(SHA-256(UTF-8 principal))[0:32] + ":" + key, the same in every client."""
    expected = hashlib.sha256(b"Bearer alice").hexdigest()[:32]
    assert expected == "9d7cce461e4b2f090a3d686b4ae72d25"  # the vector every client pins
    assert scoped_key("Bearer alice", "order-1") == "9d7cce461e4b2f090a3d686b4ae72d25:order-1"
    assert default_principal({"headers": [(b"authorization", b"Bearer alice")]}) == "Bearer alice"
    assert default_principal({"headers": []}) is None


async def test_the_middleware_sends_the_scoped_key_within_idemds_bound(client: idemd.Client) -> None:
    shop = Shop()
    k = key()
    async with http(shop.app(client)) as web:
        assert (await web.post("/orders", json={"sku": "a"}, headers={"Idempotency-Key": k})).status_code == 201
        # 33 bytes of the 255 go to the caller's prefix.
        longest = await web.post("/orders", json={"sku": "a"}, headers={"Idempotency-Key": "k" * 222})
        too_long = await web.post("/orders", json={"sku": "a"}, headers={"Idempotency-Key": "k" * 223})
    assert longest.status_code == 201 and too_long.status_code == 400
    assert "1-222 bytes" in too_long.json()["detail"] and len(shop.orders) == 2
    found = await client.lookup(operation="http.post/orders", key="9d7cce461e4b2f090a3d686b4ae72d25:" + k)
    assert found.operation.state == pb.OPERATION_STATE_SUCCEEDED
    async with http(shop.app(client, shared_keys=True)) as web:
        longest = await web.post("/orders", json={"sku": "a"}, headers={"Idempotency-Key": "k" * 255})
        too_long = await web.post("/orders", json={"sku": "a"}, headers={"Idempotency-Key": "k" * 256})
    assert longest.status_code == 201 and too_long.status_code == 400
