"""Item: request selectors (docs/api.md, "Request selectors"): the shared vectors
(testdata/selectors.json), execute_once with a selector, and both middlewares against
a real idemd: a change outside the selection replays, one inside it conflicts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import idemd
import idemd.sync
from idemd import InvalidArgumentError, Selector, SelectorError, Success
from idemd.asgi import IdempotencyMiddleware as AsgiMiddleware
from idemd.fingerprint import fingerprint_json
from idemd.wsgi import IdempotencyMiddleware as WsgiMiddleware

from conftest import key
from test_asgi import Shop as AsgiShop, http
from test_wsgi import Shop as WsgiShop, serving

SHARED_VECTORS = Path(__file__).resolve().parents[3] / "testdata" / "selectors.json"
VECTORS = json.loads(SHARED_VECTORS.read_text(encoding="utf-8"))["vectors"]


def _selector(vector: dict[str, Any]) -> Selector:
    return Selector(**vector["selector"])


@pytest.mark.parametrize("vector", VECTORS, ids=[vector["name"] for vector in VECTORS])
def test_shared_selector_vectors(vector: dict[str, Any]) -> None:
    headers = [(name, value) for name, value in vector.get("headers", [])]
    if vector.get("refused_at") == "selector":
        with pytest.raises(SelectorError):
            _selector(vector)
        return
    selector = _selector(vector)
    if vector.get("refused_at") == "request":
        with pytest.raises(InvalidArgumentError):
            selector.canonical(vector["body"], headers)
        return
    assert selector.canonical(vector["body"], headers).decode("utf-8") == vector["canonical"]
    assert selector.fingerprint(vector["body"], headers).hex() == vector["fingerprint"]


def test_the_empty_selector_is_todays_fingerprint() -> None:
    body = '{"currency":"EUR","amount":1000}'
    assert Selector().fingerprint(body) == fingerprint_json(body) and Selector().empty


def test_a_selector_list_given_as_one_string_is_refused() -> None:
    with pytest.raises(SelectorError):
        Selector(include="/amount")


OP = "payments.charge"
SELECTOR = Selector(include=["/amount", "/currency"])


async def test_execute_once_replays_a_change_outside_the_selection_and_refuses_one_inside(
    client: idemd.Client,
) -> None:
    effects: list[str] = []

    async def effect(ctx: idemd.EffectContext) -> Success:
        effects.append(ctx.operation_id)
        return Success(b"charged", "text/plain")

    k = key()
    first = await idemd.execute_once(client, OP, k, {"amount": 1000, "currency": "EUR", "trace": "a"}, effect,
                                     selector=SELECTOR)
    again = await idemd.execute_once(client, OP, k, '{"currency":"EUR","amount":1000,"trace":"b"}', effect,
                                     selector=SELECTOR)
    assert not first.replayed and again.replayed and again.body == b"charged"
    with pytest.raises(idemd.ConflictError):
        await idemd.execute_once(client, OP, k, {"amount": 1001, "currency": "EUR", "trace": "a"}, effect,
                                 selector=SELECTOR)
    assert len(effects) == 1


async def test_execute_once_refuses_a_body_the_selector_cannot_apply_to(client: idemd.Client) -> None:
    async def effect(ctx: idemd.EffectContext) -> Success:
        raise AssertionError("never runs")

    with pytest.raises(InvalidArgumentError):
        await idemd.execute_once(client, OP, key(), [1, 2], effect, selector=SELECTOR)
    with pytest.raises(ValueError, match="not to bytes"):
        await idemd.execute_once(client, OP, key(), b'{"amount":1}', effect, selector=SELECTOR)


def test_sync_execute_once_takes_a_selector(sync_client: idemd.sync.Client) -> None:
    effects: list[str] = []

    def effect(ctx: idemd.EffectContext) -> Success:
        effects.append(ctx.operation_id)
        return Success(b"charged", "text/plain")

    k = key()
    sync_client.execute_once(OP, k, {"amount": 5, "currency": "EUR", "trace": "a"}, effect, selector=SELECTOR)
    again = sync_client.execute_once(OP, k, {"amount": 5, "currency": "EUR", "trace": "b"}, effect,
                                     selector=SELECTOR)
    assert again.replayed and len(effects) == 1


MIDDLEWARE_SELECTOR = Selector(include=["/sku"], headers=["X-Tenant"])


async def test_asgi_middleware_selects_fields_and_headers(client: idemd.Client) -> None:
    shop = AsgiShop()
    async with http(shop.app(client, selector=MIDDLEWARE_SELECTOR)) as web:
        headers = {"Idempotency-Key": f'"{key()}"', "X-Tenant": "t1"}
        first = await web.post("/orders", json={"sku": "a", "note": "one"}, headers=headers)
        outside = await web.post("/orders?page=2", json={"sku": "a", "note": "two"}, headers=headers)
        inside = await web.post("/orders", json={"sku": "b", "note": "one"}, headers=headers)
        other_tenant = await web.post("/orders", json={"sku": "a", "note": "one"},
                                      headers={**headers, "X-Tenant": "t2"})
        not_an_object = await web.post("/orders", json=["a"], headers={"Idempotency-Key": f'"{key()}"'})
    assert first.status_code == outside.status_code == 201
    assert outside.headers["idempotent-replayed"] == "true" and outside.json() == first.json()
    assert inside.status_code == other_tenant.status_code == 422
    assert not_an_object.status_code == 400
    assert not_an_object.headers["content-type"] == "application/problem+json"
    assert len(shop.orders) == 1


def test_wsgi_middleware_selects_fields_and_headers(sync_client: idemd.sync.Client) -> None:
    shop = WsgiShop()
    with serving(WsgiMiddleware(shop, client=sync_client, selector=MIDDLEWARE_SELECTOR)) as web:
        headers = {"Idempotency-Key": f'"{key()}"', "X-Tenant": "t1"}
        first = web.post("/orders", json={"sku": "a", "note": "one"}, headers=headers)
        outside = web.post("/orders", json={"sku": "a", "note": "two"}, headers=headers)
        inside = web.post("/orders", json={"sku": "b", "note": "one"}, headers=headers)
        other_tenant = web.post("/orders", json={"sku": "a", "note": "one"}, headers={**headers, "X-Tenant": "t2"})
        not_json = web.post("/orders", content=b"sku=a", headers={"Idempotency-Key": f'"{key()}"'})
    assert first.status_code == outside.status_code == 201
    assert outside.headers["idempotent-replayed"] == "true" and outside.json() == first.json()
    assert inside.status_code == other_tenant.status_code == 422
    assert not_json.status_code == 400
    assert len(shop.orders) == 1


def test_a_middleware_refuses_what_is_not_a_selector() -> None:
    with pytest.raises(ValueError, match=r"selector must be an idemd\.Selector"):
        AsgiMiddleware(lambda *a: None, client=lambda: None, selector={"include": ["/a"]})  # type: ignore[arg-type]
