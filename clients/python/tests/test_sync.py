"""Item: the blocking client (idemd.sync) and its execute_once, against a real server on
each store: every RPC, typed refusals, lost replies, a restart, renewals on a thread,
the attempt deadline, ReconcileFirst, a lost lease; effects counted at a fake provider."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import idemd
import idemd.sync
from idemd import EffectContext, Retryable, Success, Terminal, Unknown
from idemd.proto import pb
from idemd.sync import execute_once

from conftest import Provider, Server, ThreadedProxy, key

OP = "payments.charge"
PAYLOAD = {"amount": 1000, "currency": "EUR"}
JSON = '{"amount":1000,"currency":"EUR"}'


def charging(provider: Provider, seen: list[EffectContext] | None = None, delay: float = 0.0) -> Any:
    def effect(ctx: EffectContext) -> Success:
        if seen is not None:
            seen.append(ctx)
        time.sleep(delay)
        return Success(provider.effect(ctx.operation_id), "application/json")

    return effect


def history(client: idemd.sync.Client, operation_id: str) -> list[str]:
    return [h.event for h in client.lookup(operation_id=operation_id, include_history=True).history]


def abandoned_attempt(client: idemd.sync.Client, k: str, attempt: float = 1.0, **fields: Any) -> pb.Ownership:
    """An earlier owner that stalled: its lease (50 ms) runs out, nobody completes."""
    claimed = client.claim(OP, k, json_payload=JSON, lease=0.05, max_attempt_duration=attempt, **fields)
    time.sleep(0.1)
    return claimed.acquired.ownership


# ---- the typed wrapper -------------------------------------------------------------


def test_every_rpc_round_trips(sync_client: idemd.sync.Client) -> None:
    client = sync_client
    k = key()
    claimed = client.claim(OP, k, json_payload=JSON, lease=5, claim_token=b"t1")
    assert claimed.WhichOneof("outcome") == "acquired"
    owner = claimed.acquired.ownership
    # The same claim_token re-sent: the same ownership, not Pending.
    again = client.claim(OP, k, json_payload=JSON, lease=5, claim_token=b"t1")
    assert again.acquired.ownership.fence == owner.fence
    assert client.renew(owner.operation_id, owner.fence, lease=5).lease.seconds <= 5
    done = client.complete(owner.operation_id, owner.fence, b'{"charge":"ch_1"}',
                           content_type="application/json", metadata={"provider": "fake"})
    assert done.state == pb.OPERATION_STATE_SUCCEEDED
    replay = client.claim(OP, k, json_payload='{"currency":"EUR","amount":1000}')
    assert replay.completed.result.body == b'{"charge":"ch_1"}'
    found = client.lookup(operation=OP, key=k, include_history=True)
    assert [h.event for h in found.history] == ["CLAIMED", "RENEWED", "COMPLETED"]

    other = client.claim(OP, key(), bytes_payload=b"x", lease=5).acquired.ownership
    failed = client.fail(other.operation_id, other.fence, pb.FAIL_DISPOSITION_UNKNOWN, code="timeout")
    assert failed.state == pb.OPERATION_STATE_UNKNOWN
    page = client.list_unresolved(operation=OP, page_size=10)
    assert other.operation_id in [op.operation_id for op in page.operations]
    settled = client.reconcile(other.operation_id, other.fence, succeeded=pb.Result(body=b"found"))
    assert settled.state == pb.OPERATION_STATE_SUCCEEDED and settled.fence > other.fence

    retry = client.claim("jobs.run", key(), bytes_payload=b"job").acquired.ownership
    assert client.fail(retry.operation_id, retry.fence, pb.FAIL_DISPOSITION_RETRYABLE, code="busy",
                       retry_after=0.01).state == pb.OPERATION_STATE_RETRY_WAIT
    final = client.claim("jobs.run", key(), bytes_payload=b"job2").acquired.ownership
    assert client.fail(final.operation_id, final.fence, pb.FAIL_DISPOSITION_TERMINAL,
                       code="card_declined").state == pb.OPERATION_STATE_FAILED


def test_refusals_are_the_same_typed_exceptions(server: Server, sync_client: idemd.sync.Client) -> None:
    client = sync_client
    k = key()
    first = client.claim(OP, k, json_payload=JSON, lease=0.05).acquired.ownership
    with pytest.raises(idemd.ConflictError) as conflict:
        client.claim(OP, k, json_payload='{"amount":2000,"currency":"EUR"}')
    assert conflict.value.reason == "IDEMPOTENCY_KEY_REUSED" and conflict.value.operation_id == first.operation_id
    time.sleep(0.1)
    second = client.claim(OP, k, json_payload=JSON, lease=5).reconcile_first.ownership
    with pytest.raises(idemd.LeaseLostError) as lost:
        client.complete(first.operation_id, first.fence, b"late")
    assert lost.value.current_fence == second.fence and lost.value.state == "IN_PROGRESS"
    client.complete(second.operation_id, second.fence, b"one")
    with pytest.raises(idemd.RequestMismatchError):
        client.complete(second.operation_id, second.fence, b"two")
    with pytest.raises(idemd.OperationTerminalError):
        client.renew(second.operation_id, second.fence)
    with pytest.raises(idemd.InvalidArgumentError) as invalid:
        client.claim("payments charge!", "", json_payload="{")
    assert {"scope.key", "scope.operation"} <= {v.field for v in invalid.value.violations}
    with pytest.raises(idemd.NotFoundError) as missing:
        client.lookup(operation_id="01a2269b-92ba-727d-ab2a-b74a6876d78e")
    assert missing.value.reason == "OPERATION_NOT_FOUND"
    with (
        idemd.SyncClient(server.addr, "idem_" + "0" * 64) as stranger,
        pytest.raises(idemd.UnauthenticatedError) as refused,
    ):
        stranger.list_unresolved()
    assert refused.value.reason == "INVALID_CREDENTIALS"


def test_list_operations_filters_pages_and_refuses(server: Server, sync_client: idemd.sync.Client) -> None:
    client = sync_client
    ledger = [client.claim("ledger.post", key(), bytes_payload=b"%d" % n).acquired.ownership.operation_id
              for n in range(3)]
    client.claim("mail.send", key(), bytes_payload=b"m")
    page = client.list_operations(filter="op:ledger.*")
    assert [op.operation_id for op in page.operations] == ledger and page.next_page_token == ""
    newest = client.list_operations(filter="op:ledger.*", order=pb.ListOperationsRequest.ORDER_NEWEST_FIRST)
    assert [op.operation_id for op in newest.operations] == ledger[::-1]
    seen: list[str] = []
    token = ""
    for _ in range(10):
        page = client.list_operations(filter="op:ledger.*", page_size=1, page_token=token)
        assert len(page.operations) <= 1
        seen += [op.operation_id for op in page.operations]
        token = page.next_page_token
        if not token:
            break
    assert seen == ledger

    with pytest.raises(idemd.InvalidArgumentError) as invalid:
        client.list_operations(filter="age:10m")
    assert invalid.value.reason == "INVALID_REQUEST"
    assert [v.field for v in invalid.value.violations] == ["filter"]
    operations_only = server.run("tenant", "create", f"py-ops-{key()[2:14]}", "--scopes", "operations")
    with (
        idemd.SyncClient(server.addr, operations_only) as caller,
        pytest.raises(idemd.errors.PermissionDeniedError) as denied,
    ):
        caller.list_operations()
    assert denied.value.reason == "MISSING_SCOPE" and denied.value.metadata.get("scope") == "reconcile"


def test_a_dead_address_is_re_sent_then_unavailable() -> None:
    policy = idemd.RetryPolicy(max_sends=3, initial_backoff=0.01, call_timeout=2)
    started = time.monotonic()
    with (
        idemd.sync.Client("127.0.0.1:1", "t", retry=policy) as nowhere,
        pytest.raises(idemd.UnavailableError) as unavailable,
    ):
        nowhere.lookup(operation_id="x")
    assert unavailable.value.reason is None and time.monotonic() - started < 5


@pytest.mark.parametrize("lost", ["claim", "complete"])
def test_a_lost_reply_is_re_sent_and_makes_one_effect(
    lost: str, sync_client: idemd.sync.Client, sync_proxy: ThreadedProxy,
    sync_proxied: idemd.sync.Client, provider: Provider,
) -> None:
    k = key()

    def effect(ctx: EffectContext) -> Success:
        if lost == "complete":
            sync_proxy.drop_next_reply()  # the Complete's reply (no Renew is due yet)
        return Success(provider.effect(ctx.operation_id))

    if lost == "claim":
        sync_proxy.drop_next_reply()
    result = execute_once(sync_proxied, OP, k, PAYLOAD, effect, lease=10)
    assert sync_proxy.dropped == 1 and len(provider.effects) == 1 and not result.replayed
    # The re-sent Claim kept its claim_token (one owner), the re-sent Complete its digest.
    assert history(sync_client, result.operation_id) == ["CLAIMED", "COMPLETED"]
    again = execute_once(sync_client, OP, k, PAYLOAD, charging(provider))
    assert again.replayed and again.body == result.body and len(provider.effects) == 1


# ---- execute_once ------------------------------------------------------------------


def test_success_is_completed_and_replayed_without_running(sync_client: idemd.sync.Client, provider: Provider) -> None:
    k = key()
    first = execute_once(sync_client, OP, k, PAYLOAD, charging(provider))
    assert not first.replayed and first.attempts == 1
    again = sync_client.execute_once(OP, k, {"currency": "EUR", "amount": 1000}, charging(provider))
    assert again.replayed and again.body == first.body and again.operation_id == first.operation_id
    assert len(provider.effects) == 1
    assert history(sync_client, first.operation_id) == ["CLAIMED", "COMPLETED"]
    with pytest.raises(idemd.ConflictError):
        execute_once(sync_client, OP, k, {"amount": 2000, "currency": "EUR"}, charging(provider))
    assert len(provider.effects) == 1


def test_terminal_is_stored_and_replayed(sync_client: idemd.sync.Client) -> None:
    k = key()
    with pytest.raises(idemd.OperationFailedError) as first:
        execute_once(sync_client, OP, k, PAYLOAD, lambda ctx: Terminal("card_declined", "insufficient funds"))
    assert first.value.code == "card_declined" and not first.value.replayed
    ran: list[EffectContext] = []
    with pytest.raises(idemd.OperationFailedError) as replay:
        execute_once(sync_client, OP, k, PAYLOAD, lambda ctx: ran.append(ctx) or Success(b"no"))
    assert replay.value.replayed and replay.value.error.message == "insufficient funds" and ran == []


def test_retryable_releases_for_a_new_attempt_with_a_fresh_claim_token(
    sync_client: idemd.sync.Client, provider: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens: list[bytes] = []
    send_claim = sync_client.send_claim

    def spy(request: pb.ClaimRequest, **kw: Any) -> Any:
        tokens.append(request.claim_token)
        return send_claim(request, **kw)

    monkeypatch.setattr(sync_client, "send_claim", spy)
    calls: list[int] = []

    def flaky(ctx: EffectContext) -> Success | Retryable:
        calls.append(ctx.attempt)
        if len(calls) == 1:
            return Retryable("provider_busy", retry_after=0.05)
        return Success(provider.effect(ctx.operation_id))

    result = execute_once(sync_client, OP, key(), PAYLOAD, flaky)
    assert calls == [1, 2] and result.attempts == 2 and len(provider.effects) == 1
    assert len(tokens) >= 2 and len(set(tokens)) == len(tokens) and all(len(t) == 16 for t in tokens)


def test_unknown_and_a_raising_effect_are_reported_unknown(sync_client: idemd.sync.Client) -> None:
    with pytest.raises(idemd.OutcomeUnknownError) as unknown:
        execute_once(sync_client, OP, key(), PAYLOAD, lambda ctx: Unknown("timeout"))
    assert sync_client.lookup(operation_id=unknown.value.operation_id).operation.state == pb.OPERATION_STATE_UNKNOWN

    def broken(ctx: EffectContext) -> Success:
        raise ConnectionResetError("provider hung up")

    with pytest.raises(idemd.OutcomeUnknownError) as raised:
        execute_once(sync_client, OP, key(), PAYLOAD, broken)
    assert isinstance(raised.value.__cause__, ConnectionResetError)
    assert sync_client.lookup(operation_id=raised.value.operation_id).operation.state == pb.OPERATION_STATE_UNKNOWN


def test_renews_on_a_thread_while_the_effect_blocks(sync_client: idemd.sync.Client, provider: Provider) -> None:
    threads: list[str] = []

    def effect(ctx: EffectContext) -> Success:
        threads.append(threading.current_thread().name)
        time.sleep(0.5)  # blocks this thread: only another one can renew meanwhile
        return Success(provider.effect(ctx.operation_id))

    result = execute_once(sync_client, OP, key(), PAYLOAD, effect, lease=0.15, attempt_duration=5)
    found = sync_client.lookup(operation_id=result.operation_id, include_history=True)
    events = [h.event for h in found.history]
    assert events[0] == "CLAIMED" and events[-1] == "COMPLETED" and "TAKEN_OVER" not in events
    assert sum(h.count for h in found.history if h.event == "RENEWED") >= 3, found.history
    assert threads == [threading.current_thread().name] and len(provider.effects) == 1


def test_at_the_attempt_deadline_the_effect_is_told_to_stop_and_never_completed(
    sync_client: idemd.sync.Client,
) -> None:
    """The effect cannot be killed: ctx.cancelled is set and UNKNOWN reported at the
    deadline; what the effect returns afterwards is not recorded."""
    told: list[float] = []
    started = time.monotonic()

    def overruns(ctx: EffectContext) -> Success:
        assert ctx.cancelled.wait(5), "never told to stop"
        told.append(time.monotonic() - started)
        time.sleep(max(0.0, started + 5.2 - time.monotonic()))  # keeps going past the deadline
        return Success(b"too late")

    # A 5 s attempt: a 500 ms margin to report UNKNOWN in time (with 1 s, 100 ms, the
    # report landed late on a loaded CI machine and the record stayed IN_PROGRESS).
    with pytest.raises(idemd.AttemptTimeoutError) as timeout:
        execute_once(sync_client, OP, key(), PAYLOAD, overruns, lease=0.2, attempt_duration=5.0)
    assert told and told[0] < 5.0 and time.monotonic() - started >= 5.2
    found = sync_client.lookup(operation_id=timeout.value.operation_id, include_history=True)
    assert found.operation.state == pb.OPERATION_STATE_UNKNOWN
    assert "COMPLETED" not in [h.event for h in found.history]
    # Recorded while idemd still took this owner's writes: reported at the deadline by
    # the watchdog, not when the effect came back (then ATTEMPT_DEADLINE_PASSED).
    assert found.history[-1].event == "OUTCOME_UNKNOWN"


def test_an_effect_that_honours_the_event_returns_at_the_deadline(sync_client: idemd.sync.Client) -> None:
    contexts: list[EffectContext] = []

    def patient(ctx: EffectContext) -> Success:
        contexts.append(ctx)
        ctx.cancelled.wait(60)
        return Success(b"never recorded")

    started = time.monotonic()
    with pytest.raises(idemd.AttemptTimeoutError):
        execute_once(sync_client, OP, key(), PAYLOAD, patient, lease=0.2, attempt_duration=5.0)
    assert time.monotonic() - started < 5.0 and contexts[0].cancel_at <= started + 5.0
    assert contexts[0].remaining() == 0.0


def test_a_re_sent_claim_answered_with_a_short_lease_renews_before_the_effect(
    sync_proxy: ThreadedProxy, sync_proxied: idemd.sync.Client, provider: Provider
) -> None:
    seen: list[EffectContext] = []
    lease, attempt = 2.0, 5.0  # re-sent after 1.3 s: under half left, 0.7 s of slack

    def effect(ctx: EffectContext) -> Success:
        seen.append(ctx)
        events = history(sync_proxied, ctx.operation_id)
        assert events[0] == "CLAIMED" and "RENEWED" in events, events  # renewed before starting
        return Success(provider.effect(ctx.operation_id))

    sync_proxy.drop_next_reply()
    sync_proxy.set_connect_delay(1.3)
    started = time.monotonic()
    result = execute_once(sync_proxied, OP, key(), PAYLOAD, effect, lease=lease, attempt_duration=attempt)
    assert sync_proxy.dropped == 1 and len(provider.effects) == 1 and result.attempts == 1
    assert seen[0].cancel_at <= started + attempt


def test_pending_waits_for_the_running_attempt_then_replays(
    sync_client: idemd.sync.Client, provider: Provider
) -> None:
    k = key()
    started = threading.Event()
    first: list[idemd.Result] = []

    def slow(ctx: EffectContext) -> Success:
        started.set()
        time.sleep(0.4)
        return Success(provider.effect(ctx.operation_id))

    runner = threading.Thread(target=lambda: first.append(execute_once(sync_client, OP, k, PAYLOAD, slow)))
    runner.start()
    assert started.wait(5)
    with pytest.raises(idemd.PendingError) as pending:
        execute_once(sync_client, OP, k, PAYLOAD, charging(provider), deadline=0)
    assert pending.value.reason == "PENDING_REASON_IN_PROGRESS"
    second = execute_once(sync_client, OP, k, PAYLOAD, charging(provider))
    runner.join(5)
    assert second.replayed and second.body == first[0].body and len(provider.effects) == 1


def test_concurrent_duplicates_on_threads_make_one_effect(server: Server, provider: Provider) -> None:
    k = key()
    results: list[idemd.Result] = []
    with idemd.SyncClient(server.addr, server.token) as shared:  # type: ignore[attr-defined]
        threads = [threading.Thread(target=lambda: results.append(
            execute_once(shared, OP, k, PAYLOAD, charging(provider, delay=0.3)))) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert len(results) == 8 and len(provider.effects) == 1
    assert len({r.body for r in results}) == 1 and sum(not r.replayed for r in results) == 1


def test_reconcile_first_with_a_deduplicating_provider_runs_with_the_context(
    sync_client: idemd.sync.Client, provider: Provider
) -> None:
    k = key()
    stalled = abandoned_attempt(sync_client, k, attempt=2.0)
    seen: list[EffectContext] = []
    result = execute_once(sync_client, OP, k, PAYLOAD, charging(provider, seen), lease=1, attempt_duration=2.0,
                          provider_deduplicates=True)
    ctx = seen[0]
    assert ctx.previous_outcome_unknown and ctx.attempt == 2 and ctx.previous_fence == stalled.fence
    assert ctx.operation_id == stalled.operation_id == result.operation_id
    assert ctx.previous_attempt_deadline is not None and 0 < ctx.previous_attempt_deadline <= 2.0


def test_reconcile_first_without_a_lookup_or_deduplication_declines_and_never_runs(
    sync_client: idemd.sync.Client, provider: Provider
) -> None:
    """As the asyncio client's test (issue 17 item 3): no effect, Fail NOT_STARTED with
    the earlier deadline kept, and an error that says what to do."""
    k = key()
    stalled = abandoned_attempt(sync_client, k, attempt=3.0)
    before = sync_client.lookup(operation_id=stalled.operation_id).operation
    with pytest.raises(idemd.OutcomeUnknownError) as unknown:
        execute_once(sync_client, OP, k, PAYLOAD, charging(provider), lease=1, attempt_duration=3.0)
    assert provider.effects == []
    message = str(unknown.value)
    assert "pass a lookup" in message and "provider_deduplicates" in message and "reconcile" in message
    found = sync_client.lookup(operation_id=stalled.operation_id, include_history=True)
    entries = [entry for entry in found.history if entry.event != "RENEWED"]
    assert [entry.event for entry in entries] == ["CLAIMED", "TAKEN_OVER", "OUTCOME_UNKNOWN"], entries
    assert entries[-1].detail == "not_started" and entries[-1].attempt == 2
    assert found.operation.attempt_deadline_at == before.attempt_deadline_at


def test_a_negative_lookup_that_began_before_the_earlier_deadline_is_not_trusted(
    sync_client: idemd.sync.Client, provider: Provider
) -> None:
    """As the asyncio client's test (issue 17 item 1): the first lookup reads the
    provider before the earlier owner's charge lands (0.3 s before that owner's
    deadline) and answers "nothing" after the deadline; it must not count."""
    k = key()
    earlier = sync_client.claim(OP, k, json_payload=JSON, lease=2.0, max_attempt_duration=3.0).acquired.ownership
    claimed_at = time.monotonic()
    landed: list[float] = []

    def land() -> None:
        landed.append(time.monotonic())
        provider.effect(earlier.operation_id)

    landing = threading.Timer(2.7, land)
    landing.start()
    lookups: list[tuple[float, float, float, bool]] = []

    def slow_lookup(ctx: EffectContext) -> Success | None:
        started = time.monotonic()
        body = provider.records.get(ctx.operation_id)  # the provider as it is now
        time.sleep(1.0)
        assert ctx.previous_attempt_settles_at is not None
        lookups.append((started, time.monotonic(), ctx.previous_attempt_settles_at, body is not None))
        return Success(body) if body else None

    time.sleep(max(0.0, claimed_at + 2.2 - time.monotonic()))
    result = execute_once(sync_client, OP, k, PAYLOAD, charging(provider), lookup=slow_lookup,
                          lease=2.0, attempt_duration=3.0, lookup_interval=0.1)
    landing.join()
    assert len(provider.effects) == 1, lookups
    assert result.body == provider.records[earlier.operation_id] and result.attempts == 2 and not result.replayed
    started, answered, settles_at, found = lookups[0]
    assert started < landed[0] < settles_at < answered and not found, (lookups, landed)
    assert lookups[-1][3], lookups


def test_a_negative_lookup_is_not_trusted_while_the_earlier_attempt_may_run(
    sync_client: idemd.sync.Client, provider: Provider
) -> None:
    k = key()
    before = time.monotonic()
    abandoned_attempt(sync_client, k, attempt=1.0)
    lookups: list[float] = []
    ran: list[float] = []

    def lookup(ctx: EffectContext) -> Success | None:
        lookups.append(time.monotonic())
        return None

    def effect(ctx: EffectContext) -> Success:
        ran.append(time.monotonic())
        return Success(provider.effect(ctx.operation_id))

    # The doubt lasts as long as this attempt: it declines (NOT_STARTED) and the next
    # attempt waits the doubt out, then runs.
    result = execute_once(sync_client, OP, k, PAYLOAD, effect, lookup=lookup,
                          lease=0.3, attempt_duration=1.0, lookup_interval=0.2)
    # Usually the taking-over attempt declines and a third waits the doubt out; on a slow
    # machine the takeover comes late enough for its own attempt to outlast the doubt,
    # and it runs then. Either way: after the doubt, once.
    assert len(provider.effects) == 1 and len(lookups) >= 2 and result.attempts in (2, 3)
    assert ran[0] >= before + 1.0 - 0.05, ran[0] - before


def test_a_lookup_that_finds_the_earlier_effect_records_it(sync_client: idemd.sync.Client, provider: Provider) -> None:
    k = key()
    stalled = abandoned_attempt(sync_client, k, attempt=2.0)
    landing = threading.Timer(0.3, provider.effect, args=(stalled.operation_id,))  # the stalled owner's effect lands
    landing.start()

    def lookup(ctx: EffectContext) -> Success | None:
        body = provider.records.get(ctx.operation_id)
        return Success(body) if body else None

    result = execute_once(sync_client, OP, k, PAYLOAD, charging(provider), lookup=lookup,
                          lease=0.5, attempt_duration=2.0, lookup_interval=0.1)
    landing.join()
    assert len(provider.effects) == 1 and result.body == provider.records[stalled.operation_id]
    again = execute_once(sync_client, OP, k, PAYLOAD, charging(provider))
    assert again.replayed and again.body == result.body and len(provider.effects) == 1


def test_lease_lost_looks_up_and_never_redoes(
    sync_client: idemd.sync.Client, sync_proxy: ThreadedProxy, sync_proxied: idemd.sync.Client, provider: Provider
) -> None:
    k = key()
    told: list[bool] = []

    def effect(ctx: EffectContext) -> Success:
        provider.effect(ctx.operation_id)
        sync_proxy.cut()  # this owner's renewals fail; its lease lapses
        time.sleep(0.8)
        other = sync_client.claim(OP, k, json_payload=JSON, lease=5).reconcile_first.ownership
        sync_client.complete(other.operation_id, other.fence, b"reconciled by another owner")
        sync_proxy.restore()
        told.append(ctx.cancelled.wait(5))  # the renewal thread learns LEASE_LOST
        return Success(b"mine")

    # A 0.5 s lease: 0.15 s could leave too little on a loaded machine (declined).
    result = execute_once(sync_proxied, OP, k, PAYLOAD, effect, lease=0.5, attempt_duration=5)
    assert told == [True]
    assert result.body == b"reconciled by another owner" and result.replayed and len(provider.effects) == 1
    assert "STALE_WRITE_REFUSED" in history(sync_client, result.operation_id)


def test_needs_reconciliation_never_executes(sync_client: idemd.sync.Client, provider: Provider) -> None:
    k = key()
    stalled = abandoned_attempt(sync_client, k, max_attempts=1)
    with pytest.raises(idemd.NeedsReconciliationError) as needs:
        execute_once(sync_client, OP, k, PAYLOAD, charging(provider), max_attempts=1)
    assert needs.value.operation_id == stalled.operation_id and provider.effects == []


class _NoOutcome:
    def send_claim(self, request: pb.ClaimRequest, **kw: Any) -> tuple[pb.ClaimResponse, float]:
        return pb.ClaimResponse(), time.monotonic()


def test_an_unknown_outcome_never_executes(provider: Provider) -> None:
    with pytest.raises(idemd.errors.UnrecognisedOutcomeError):
        execute_once(_NoOutcome(), OP, key(), PAYLOAD, charging(provider))  # type: ignore[arg-type]
    assert provider.effects == []


@pytest.mark.parametrize("restart", ["during_the_effect", "before_the_complete"])
def test_a_server_restart_during_the_effect_makes_one_effect(
    restart: str, server: Server, sync_client: idemd.sync.Client, provider: Provider
) -> None:
    k = key()

    def effect(ctx: EffectContext) -> Success:
        body = provider.effect(ctx.operation_id)
        server.kill()  # SIGKILL: the record holds only what was committed
        if restart == "during_the_effect":
            server.start()
        else:
            # Back only after the effect returned: the Complete is re-sent until then.
            threading.Timer(0.3, server.start).start()
        return Success(body)

    result = execute_once(sync_client, OP, k, PAYLOAD, effect, lease=10)
    deadline = time.monotonic() + 10
    while server.starts < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(provider.effects) == 1 and server.starts == 2
    again = execute_once(sync_client, OP, k, PAYLOAD, charging(provider))
    assert again.replayed and again.body == result.body and len(provider.effects) == 1
    assert [e for e in history(sync_client, result.operation_id) if e != "RENEWED"] == ["CLAIMED", "COMPLETED"]


def recording(provider: Provider, attempts: list[int]) -> Any:
    def effect(ctx: EffectContext) -> Success:
        attempts.append(ctx.attempt)
        return Success(provider.effect(ctx.operation_id))

    return effect


def test_too_little_lease_left_never_starts_the_effect(
    sync_proxy: ThreadedProxy, sync_proxied: idemd.sync.Client, sync_client: idemd.sync.Client, provider: Provider
) -> None:
    # The Claim's reply and the Renew's both arrive with 200 ms of a 1 s lease left:
    # attempt 1 declines (Fail NOT_STARTED: released at once) and attempt 2 runs.
    sync_proxy.delay_replies(0.8, 0.8)
    attempts: list[int] = []
    result = execute_once(sync_proxied, OP, key(), PAYLOAD, recording(provider, attempts),
                          lease=1.0, attempt_duration=5.0)
    assert sync_proxy.delayed == 2
    assert attempts == [2] and result.attempts == 2 and len(provider.effects) == 1
    entries = list(sync_client.lookup(operation_id=result.operation_id, include_history=True).history)
    # A Renew of attempt 1 still in flight when it declined lands refused, harmlessly.
    events = [entry.event for entry in entries if (entry.event, entry.detail) != ("STALE_WRITE_REFUSED", "renew")]
    assert events == ["CLAIMED", "RENEWED", "RETRY_SCHEDULED", "RETRY_STARTED", "COMPLETED"], entries
    assert entries[2].detail == "not_started"


def test_a_blocking_lookup_past_the_cancel_point_declines_and_hands_on_the_doubt(
    sync_client: idemd.sync.Client, provider: Provider
) -> None:
    """The watchdog fires while a blocking lookup (not the effect) still runs: the
    attempt never started the effect, so it says NOT_STARTED (the doubt keeps the
    earlier attempt's deadline), not UNKNOWN, and the next attempt runs."""
    k = key()
    abandoned_attempt(sync_client, k, attempt=1.0)
    lookups: list[int] = []

    def slow_lookup(ctx: EffectContext) -> Success | None:
        lookups.append(ctx.attempt)
        if len(lookups) == 1:
            ctx.cancelled.wait(2.0)  # past this attempt's cancel point
            time.sleep(0.05)
        return None

    attempts: list[int] = []
    result = execute_once(sync_client, OP, k, PAYLOAD, recording(provider, attempts), lookup=slow_lookup,
                          lease=0.5, attempt_duration=1.0, lookup_interval=0.1)
    assert attempts == [3] and lookups[0] == 2 and len(provider.effects) == 1
    entries = [e for e in sync_client.lookup(operation_id=result.operation_id, include_history=True).history
               if e.event != "RENEWED"]
    events = [entry.event for entry in entries]
    assert events == ["CLAIMED", "TAKEN_OVER", "OUTCOME_UNKNOWN", "TAKEN_OVER", "COMPLETED"], entries
    assert entries[2].detail == "not_started"


def test_a_resent_claim_counts_its_attempt_from_the_answered_send(
    server: Server, sync_proxy: ThreadedProxy, sync_client: idemd.sync.Client, provider: Provider
) -> None:
    # As the asyncio client's test: the first reply (and, the proxy relaying bytes in
    # order, every reply behind it) is held 2 s; the sends at 0 and ~0.8 s time out,
    # the one at ~1.6 s is answered at ~2 s with ~1.9 s of the 3.5 s attempt left.
    # Counted from that send attempt 1 runs; counted from the first send it would be
    # past its cancel point (~1.55 s) on arrival, decline, and attempt 2 would run.
    sync_proxy.delay_replies(2.0)
    policy = idemd.RetryPolicy(initial_backoff=0.02, max_backoff=0.2, call_timeout=0.8)
    attempts: list[int] = []
    started = time.monotonic()
    with idemd.sync.Client(sync_proxy.addr, server.token, retry=policy) as resending:  # type: ignore[attr-defined]
        result = execute_once(resending, OP, key(), PAYLOAD, recording(provider, attempts),
                              lease=3.0, attempt_duration=3.5)
    assert sync_proxy.delayed == 1 and time.monotonic() - started >= 2.0
    assert attempts == [1] and result.attempts == 1 and len(provider.effects) == 1
    events = [event for event in history(sync_client, result.operation_id) if event != "RENEWED"]
    assert events == ["CLAIMED", "COMPLETED"], events
