"""Issue 21, item 5: a deployment that changes how a request is normalised (a default
written out, a selector that takes one more field) must not turn the retries of
operations already in flight into false conflicts. The new version sends the same
request's fingerprints under the old normalisation in ``previous_fingerprints``
(docs/api.md, "Changing the normalisation while operations are in flight").

A rolling deployment against a real idemd on each store, through ``execute_once``
and through both middlewares: what the old version completed replays to the new one,
what it left running is 409 and then replays, what it left in doubt is taken over;
another request under the same key still conflicts, and so does the new version's
retry once the window is closed (no previous fingerprints). The local checks refuse
what the server would refuse before anything is sent."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import idemd
import idemd.sync
from idemd import EffectContext, InvalidArgumentError, Selector, Success, execute_once
from idemd.asgi import IdempotencyMiddleware as AsgiMiddleware
from idemd.fingerprint import fingerprint_json
from idemd.protocol import Call, execute_once_steps
from idemd.wsgi import IdempotencyMiddleware as WsgiMiddleware

from conftest import Provider, key
from test_asgi import Shop as AsgiShop, http, idem_key
from test_wsgi import Shop as WsgiShop, serving

OP = "payments.charge"
TESTDATA = Path(__file__).resolve().parents[3] / "testdata"
SELECTOR_VECTORS = json.loads((TESTDATA / "selectors.json").read_text(encoding="utf-8"))["vectors"]
FINGERPRINT_VECTORS = json.loads((TESTDATA / "fingerprints.json").read_text(encoding="utf-8"))["vectors"]
SELECTED = [vector for vector in SELECTOR_VECTORS if "fingerprint" in vector]


# ---- the old and the new normalisation (execute_once) -----------------------------


def old_payload(amount: int) -> str:
    """The old version's request: no currency."""
    return json.dumps({"amount": amount})


def new_payload(amount: int) -> dict[str, Any]:
    """The new version's normalisation of the same intent: the default currency now
    written out, so the canonical document (and the fingerprint) differ."""
    return {"amount": amount, "currency": "EUR"}


def old_fingerprint(amount: int) -> bytes:
    """What the new version computes of the old normalisation, to send beside its own."""
    return fingerprint_json(old_payload(amount))


def charging(provider: Provider) -> Any:
    async def effect(ctx: EffectContext) -> Success:
        return Success(provider.effect(ctx.operation_id), "application/json")

    return effect


def looking_up(provider: Provider) -> Any:
    async def lookup(ctx: EffectContext) -> Success | None:
        body = provider.records.get(ctx.operation_id)
        return Success(body, "application/json") if body is not None else None

    return lookup


async def test_a_rolling_deployment_replays_and_takes_over_instead_of_conflicting(
    client: idemd.Client, provider: Provider
) -> None:
    assert fingerprint_json(json.dumps(new_payload(100))) != old_fingerprint(100)  # the window is needed

    # The old version completed one operation...
    done = key()
    first = await execute_once(client, OP, done, old_payload(100), charging(provider))
    # ...and claimed another, then stalled before its effect: its lease runs out, its
    # attempt's outcome is unknown to idemd.
    stalled = key()
    claimed = await client.claim(OP, stalled, json_payload=old_payload(200), lease=0.05, max_attempt_duration=0.5)
    stalled_id = claimed.acquired.ownership.operation_id
    await asyncio.sleep(0.1)

    # The new version, once the window is closed (no previous fingerprints): its retry
    # is refused as another request. This is what the window prevents.
    with pytest.raises(idemd.ConflictError):
        await execute_once(client, OP, done, new_payload(100), charging(provider))

    # Within the window: the completed operation replays, its effect not run again.
    replayed = await execute_once(client, OP, done, new_payload(100), charging(provider),
                                  previous_fingerprints=[old_fingerprint(100)])
    assert replayed.replayed and replayed.operation_id == first.operation_id and replayed.body == first.body

    # The stalled one is taken over (ReconcileFirst, then the lookup finds nothing once
    # the old attempt has settled), not refused: the effect runs once, now.
    resumed = await execute_once(client, OP, stalled, new_payload(200), charging(provider),
                                 lookup=looking_up(provider), lease=0.5, attempt_duration=2.0,
                                 lookup_interval=0.1, deadline=10.0,
                                 previous_fingerprints=[old_fingerprint(200)])
    assert not resumed.replayed and resumed.operation_id == stalled_id
    found = await client.lookup(operation_id=stalled_id, include_history=True)
    taken_over = [entry for entry in found.history if entry.event == "TAKEN_OVER"]
    assert taken_over and taken_over[0].detail.endswith("request matched by previous_fingerprints[0]"), found.history
    # The stored fingerprint stays the first Claim's; no conflict was counted.
    assert found.operation.fingerprint == old_fingerprint(200) and found.operation.conflicts == 0

    # A genuinely different request under a key of the old version still conflicts,
    # window or not.
    with pytest.raises(idemd.ConflictError):
        await execute_once(client, OP, done, new_payload(999), charging(provider),
                           previous_fingerprints=[old_fingerprint(999)])

    # Two effects in all, one per intent: none for the replay, none for the refusals.
    assert provider.effects == [first.operation_id, stalled_id]


def test_the_blocking_execute_once_sends_previous_fingerprints(
    sync_client: idemd.sync.Client, provider: Provider
) -> None:
    def effect(ctx: EffectContext) -> Success:
        return Success(provider.effect(ctx.operation_id))

    k = key()
    first = sync_client.execute_once(OP, k, old_payload(5), effect)
    with pytest.raises(idemd.ConflictError):
        sync_client.execute_once(OP, k, new_payload(5), effect)
    again = sync_client.execute_once(OP, k, new_payload(5), effect, previous_fingerprints=[old_fingerprint(5)])
    assert again.replayed and again.operation_id == first.operation_id and len(provider.effects) == 1


# ---- the local checks: nothing the server would refuse is sent ----------------------


def _steps(previous: Any) -> Any:
    return execute_once_steps(
        OP, "k", {"amount": 1}, has_lookup=False, provider_deduplicates=False, lease=30.0,
        attempt_duration=300.0, deadline=1.0, fingerprint=None, max_attempts=0, retention=None,
        operation_deadline=None, lookup_interval=1.0, previous_fingerprints=previous,
    )


@pytest.mark.parametrize(
    ("previous", "field"),
    [
        ([bytes(32)] * 5, "previous_fingerprints"),
        ([bytes(32), bytes(31)], "previous_fingerprints[1]"),
        ([bytes(33)], "previous_fingerprints[0]"),
        (["00" * 32], "previous_fingerprints[0]"),  # hex text is not the 32 bytes
        (bytes(32), "previous_fingerprints"),  # one fingerprint where a list belongs
    ],
)
def test_previous_fingerprints_the_server_would_refuse_are_refused_before_any_rpc(previous: Any, field: str) -> None:
    # The protocol yields every RPC as a step: raising before the first step is
    # raising before anything is sent.
    with pytest.raises(InvalidArgumentError) as refused:
        next(_steps(previous))
    assert [violation.field for violation in refused.value.violations] == [field]
    assert refused.value.reason == "INVALID_REQUEST"


def test_up_to_four_previous_fingerprints_ride_on_the_claim() -> None:
    previous = [bytes([n]) * 32 for n in range(4)]
    step = next(_steps(previous))
    assert isinstance(step, Call) and step.method == "send_claim"
    assert list(step.args[0].previous_fingerprints) == previous


def test_outside_a_window_the_claim_carries_none() -> None:
    step = next(_steps(()))
    assert isinstance(step, Call) and list(step.args[0].previous_fingerprints) == []


async def test_execute_once_refuses_a_bad_list_without_creating_anything(client: idemd.Client) -> None:
    ran: list[str] = []

    async def effect(ctx: EffectContext) -> Success:
        ran.append(ctx.operation_id)
        return Success(b"")

    k = key()
    with pytest.raises(InvalidArgumentError):
        await execute_once(client, OP, k, new_payload(1), effect, previous_fingerprints=[bytes(32)] * 5)
    with pytest.raises(idemd.NotFoundError):
        await client.lookup(operation=OP, key=k)
    assert ran == []


@pytest.mark.parametrize(
    "previous",
    [[Selector(include=["/a"])] * 5, [{"include": ["/a"]}], Selector(include=["/a"])],
    ids=["five", "not-a-selector", "one-selector-not-a-list"],
)
def test_a_middleware_refuses_previous_selectors_it_cannot_send(previous: Any) -> None:
    with pytest.raises(ValueError, match="previous_selectors"):
        AsgiMiddleware(lambda *a: None, client=lambda: None, previous_selectors=previous)  # type: ignore[arg-type, return-value]
    with pytest.raises(ValueError, match="previous_selectors"):
        WsgiMiddleware(lambda *a: None, client=lambda: None, previous_selectors=previous)  # type: ignore[arg-type, return-value]


# ---- the selector's fingerprint is the server's -----------------------------------


@pytest.mark.parametrize("vector", SELECTED, ids=[vector["name"] for vector in SELECTED])
def test_a_selectors_fingerprint_is_the_json_fingerprint_of_its_canonical_document(vector: dict[str, Any]) -> None:
    headers = [(name, value) for name, value in vector.get("headers", [])]
    selector = Selector(**vector["selector"])
    assert fingerprint_json(vector["canonical"]).hex() == vector["fingerprint"]
    assert selector.fingerprint(vector["body"], headers).hex() == vector["fingerprint"]


def test_the_empty_selectors_fingerprint_is_each_json_vectors() -> None:
    checked = 0
    for vector in FINGERPRINT_VECTORS:
        if vector["mode"] != "json" or "fingerprint" not in vector:
            continue
        assert Selector().fingerprint(vector["input"]).hex() == vector["fingerprint"], vector["name"]
        checked += 1
    assert checked >= 10


async def test_the_server_stores_the_selectors_fingerprint_for_the_selected_document(client: idemd.Client) -> None:
    """Differential: the server fingerprints each selected canonical document sent as
    json_payload; what it stores is what the selector computes, and the vector's."""
    for vector in SELECTED:
        headers = [(name, value) for name, value in vector.get("headers", [])]
        selector = Selector(**vector["selector"])
        claimed = await client.claim(OP, key(), json_payload=vector["canonical"])
        found = await client.lookup(operation_id=claimed.acquired.ownership.operation_id)
        assert found.operation.fingerprint == selector.fingerprint(vector["body"], headers), vector["name"]
        assert found.operation.fingerprint.hex() == vector["fingerprint"], vector["name"]


# ---- the middlewares: the old selector beside the new one ---------------------------

#: The old version identified an order by its amount; the new one by amount and
#: currency. Bodies always carried both, so the same request now has another
#: fingerprint.
OLD = Selector(include=["/amount"])
NEW = Selector(include=["/amount", "/currency"])


def order(amount: int, note: str = "") -> dict[str, Any]:
    return {"amount": amount, "currency": "EUR", "note": note}


async def test_asgi_rolling_deployment_with_a_changed_selector(client: idemd.Client) -> None:
    assert OLD.fingerprint(order(100)) != NEW.fingerprint(order(100))  # the window is needed
    shop = AsgiShop()
    old_version = shop.app(client, selector=OLD)
    new_version = shop.app(client, selector=NEW, previous_selectors=[OLD])
    window_closed = shop.app(client, selector=NEW)
    async with http(old_version) as old, http(new_version) as new, http(window_closed) as closed:
        done, running = idem_key(), idem_key()
        first = await old.post("/orders", json=order(100, "first"), headers=done)
        assert first.status_code == 201

        # The old version still runs a request; the new version's retry of it waits
        # for it (409), it is not another request (422).
        shop.entered.clear()
        shop.hold = asyncio.Event()
        in_flight = asyncio.create_task(old.post("/orders", json=order(200), headers=running))
        await shop.entered.wait()
        busy = await new.post("/orders", json=order(200, "retry"), headers=running)
        shop.hold.set()
        finished = await in_flight
        assert busy.status_code == 409 and finished.status_code == 201

        retried = await new.post("/orders", json=order(200, "retry"), headers=running)
        replayed = await new.post("/orders", json=order(100, "retry"), headers=done)
        other_amount = await new.post("/orders", json=order(999), headers=done)
        after_the_window = await closed.post("/orders", json=order(100), headers=done)
    assert retried.status_code == 201 and retried.headers["idempotent-replayed"] == "true"
    assert retried.json() == finished.json()
    assert replayed.status_code == 201 and replayed.headers["idempotent-replayed"] == "true"
    assert replayed.json() == first.json()
    assert other_amount.status_code == 422 and after_the_window.status_code == 422
    assert len(shop.orders) == 2


async def test_asgi_moving_from_the_whole_request_to_a_selector(client: idemd.Client) -> None:
    """``None`` stands for a version without a selector (the whole request)."""
    shop = AsgiShop()
    async with http(shop.app(client)) as old, \
            http(shop.app(client, selector=NEW, previous_selectors=[None])) as new:
        headers = idem_key()
        first = await old.post("/orders", json=order(100), headers=headers)
        again = await new.post("/orders", json=order(100), headers=headers)
        other = await new.post("/orders", json=order(101), headers=headers)
    assert first.status_code == again.status_code == 201 and again.headers["idempotent-replayed"] == "true"
    assert other.status_code == 422 and len(shop.orders) == 1


#: The WSGI case also drops a header from the selection: the previous selector's
#: headers are read from the request although the new selector takes none.
OLD_WITH_TENANT = Selector(include=["/amount"], headers=["X-Tenant"])


def test_wsgi_rolling_deployment_with_a_changed_selector(sync_client: idemd.sync.Client) -> None:
    shop = WsgiShop()
    old_app = WsgiMiddleware(shop, client=sync_client, selector=OLD_WITH_TENANT)
    new_app = WsgiMiddleware(shop, client=sync_client, selector=NEW, previous_selectors=[OLD_WITH_TENANT])
    closed_app = WsgiMiddleware(shop, client=sync_client, selector=NEW)
    with serving(old_app) as old, serving(new_app) as new, serving(closed_app) as closed:
        headers = {"Idempotency-Key": f'"{key()}"', "X-Tenant": "t1"}
        first = old.post("/orders", json=order(100), headers=headers)
        replayed = new.post("/orders", json=order(100, "retry"), headers=headers)
        other_tenant = new.post("/orders", json=order(100), headers={**headers, "X-Tenant": "t2"})
        other_amount = new.post("/orders", json=order(999), headers=headers)
        after_the_window = closed.post("/orders", json=order(100), headers=headers)
    assert first.status_code == replayed.status_code == 201
    assert replayed.headers["idempotent-replayed"] == "true" and replayed.json() == first.json()
    assert other_tenant.status_code == other_amount.status_code == after_the_window.status_code == 422
    assert len(shop.orders) == 1
