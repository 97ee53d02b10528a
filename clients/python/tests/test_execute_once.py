"""Item: execute_once's semantics, one test each, against a real server on each store."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import idemd
from idemd import EffectContext, Retryable, Success, Terminal, Unknown, execute_once
from idemd.execute import previous_attempt_settles_at
from idemd.proto import pb
from idemd.wire import duration

from conftest import Provider, key
from proxy import Proxy

OP = "payments.charge"
PAYLOAD = {"amount": 1000, "currency": "EUR"}
JSON = '{"amount":1000,"currency":"EUR"}'


def charging(provider: Provider, seen: list[EffectContext] | None = None, delay: float = 0.0) -> Any:
    async def effect(ctx: EffectContext) -> Success:
        if seen is not None:
            seen.append(ctx)
        await asyncio.sleep(delay)
        return Success(provider.effect(ctx.operation_id), "application/json")

    return effect


async def history(client: idemd.Client, operation_id: str) -> list[str]:
    found = await client.lookup(operation_id=operation_id, include_history=True)
    return [entry.event for entry in found.history]


async def abandoned_attempt(client: idemd.Client, k: str, **fields: Any) -> pb.Ownership:
    """An earlier owner that stalled: its lease (50 ms) runs out, nobody completes."""
    claimed = await client.claim(OP, k, json_payload='{"amount":1000,"currency":"EUR"}',
                                 lease=0.05, max_attempt_duration=fields.pop("attempt", 1.0), **fields)
    await asyncio.sleep(0.1)
    return claimed.acquired.ownership


async def test_success_is_completed_and_replayed_without_running(client: idemd.Client, provider: Provider) -> None:
    k = key()
    first = await execute_once(client, OP, k, PAYLOAD, charging(provider))
    assert not first.replayed and first.attempts == 1
    again = await client.execute_once(OP, k, {"currency": "EUR", "amount": 1000}, charging(provider))
    assert again.replayed and again.body == first.body and again.operation_id == first.operation_id
    assert len(provider.effects) == 1
    assert await history(client, first.operation_id) == ["CLAIMED", "COMPLETED"]


async def test_terminal_is_stored_and_replayed_as_a_typed_exception(client: idemd.Client) -> None:
    async def declined(ctx: EffectContext) -> Terminal:
        return Terminal("card_declined", "insufficient funds", {"decline_code": "51"})

    k = key()
    with pytest.raises(idemd.OperationFailedError) as first:
        await execute_once(client, OP, k, PAYLOAD, declined)
    assert first.value.code == "card_declined" and not first.value.replayed
    ran = []

    async def never(ctx: EffectContext) -> Success:
        ran.append(ctx)
        return Success(b"no")

    with pytest.raises(idemd.OperationFailedError) as replay:
        await execute_once(client, OP, k, PAYLOAD, never)
    assert replay.value.replayed and replay.value.error.message == "insufficient funds"
    assert dict(replay.value.error.metadata) == {"decline_code": "51"}
    assert replay.value.reason == "FAILURE_REASON_TERMINAL"
    assert ran == []


async def test_retryable_releases_for_a_new_attempt_with_a_fresh_claim_token(
    client: idemd.Client, provider: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens: list[bytes] = []
    send_claim = client.send_claim

    async def spy(request: pb.ClaimRequest, **kw: Any) -> Any:
        tokens.append(request.claim_token)
        return await send_claim(request, **kw)

    monkeypatch.setattr(client, "send_claim", spy)
    calls = []

    async def flaky(ctx: EffectContext) -> Success | Retryable:
        calls.append(ctx.attempt)
        if len(calls) == 1:
            return Retryable("provider_busy", retry_after=0.05)
        return Success(provider.effect(ctx.operation_id))

    result = await execute_once(client, OP, key(), PAYLOAD, flaky)
    assert calls == [1, 2] and result.attempts == 2 and len(provider.effects) == 1
    assert len(tokens) >= 2 and len(set(tokens)) == len(tokens) and all(len(t) == 16 for t in tokens)


async def test_unknown_and_a_raising_effect_are_reported_unknown(client: idemd.Client) -> None:
    async def unsure(ctx: EffectContext) -> Unknown:
        return Unknown("timeout", "provider did not answer")

    with pytest.raises(idemd.OutcomeUnknownError) as unknown:
        await execute_once(client, OP, key(), PAYLOAD, unsure)
    found = await client.lookup(operation_id=unknown.value.operation_id)
    assert found.operation.state == pb.OPERATION_STATE_UNKNOWN

    async def broken(ctx: EffectContext) -> Success:
        raise ConnectionResetError("provider hung up")

    with pytest.raises(idemd.OutcomeUnknownError) as raised:
        await execute_once(client, OP, key(), PAYLOAD, broken)
    assert isinstance(raised.value.__cause__, ConnectionResetError)
    assert (await client.lookup(operation_id=raised.value.operation_id)).operation.state == pb.OPERATION_STATE_UNKNOWN


async def test_renews_while_the_effect_runs(client: idemd.Client, provider: Provider) -> None:
    k = key()
    result = await execute_once(client, OP, k, PAYLOAD, charging(provider, delay=0.5), lease=0.15, attempt_duration=5)
    found = await client.lookup(operation_id=result.operation_id, include_history=True)
    events = [entry.event for entry in found.history]
    assert events[0] == "CLAIMED" and events[-1] == "COMPLETED"
    # One owner's renewals are one history entry that counts them.
    renewals = sum(entry.count for entry in found.history if entry.event == "RENEWED")
    assert renewals >= 3, found.history
    assert "TAKEN_OVER" not in events and len(provider.effects) == 1


async def test_the_effect_is_cancelled_at_the_attempt_deadline_then_unknown(client: idemd.Client) -> None:
    cancelled = asyncio.Event()
    contexts: list[EffectContext] = []

    async def hangs(ctx: EffectContext) -> Success:
        contexts.append(ctx)
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return Success(b"never")

    started = time.monotonic()
    with pytest.raises(idemd.AttemptTimeoutError) as timeout:
        # 5 s: a 500 ms margin to report UNKNOWN in time on a loaded machine.
        await execute_once(client, OP, key(), PAYLOAD, hangs, lease=0.2, attempt_duration=5.0)
    assert cancelled.is_set()
    assert time.monotonic() - started < 5.0  # cancelled before the deadline, to report it
    assert contexts[0].cancel_at <= started + 5.0
    found = await client.lookup(operation_id=timeout.value.operation_id, include_history=True)
    assert found.operation.state == pb.OPERATION_STATE_UNKNOWN
    assert found.history[-1].event == "OUTCOME_UNKNOWN"


async def test_a_re_sent_claim_answered_with_a_short_lease_renews_before_the_effect(
    server: Any, proxy: Proxy, proxied: idemd.Client, provider: Provider
) -> None:
    """The first Claim's reply is lost and the re-send is slow: the re-send is answered
    with what is left of the lease at its handling, too little, so the owner renews
    before it starts the effect. (Re-sent after 1.3 s of a 2 s lease: under half is
    left, and 0.7 s of slack before it lapses on a loaded machine.)"""
    seen: list[EffectContext] = []
    lease, attempt = 2.0, 5.0

    async def effect(ctx: EffectContext) -> Success:
        seen.append(ctx)
        events = await history(proxied, ctx.operation_id)
        assert events[0] == "CLAIMED" and "RENEWED" in events, events  # renewed before starting
        return Success(provider.effect(ctx.operation_id))

    proxy.drop_next_reply()
    proxy.connect_delay = 1.3
    started = time.monotonic()
    result = await execute_once(proxied, OP, key(), PAYLOAD, effect, lease=lease, attempt_duration=attempt)
    assert proxy.dropped == 1 and len(provider.effects) == 1
    # The re-sent Claim (same claim_token) got the same ownership: one attempt.
    assert result.attempts == 1
    assert seen[0].cancel_at <= started + attempt


def started_charging(provider: Provider, started: asyncio.Event, delay: float) -> Any:
    async def effect(ctx: EffectContext) -> Success:
        started.set()
        await asyncio.sleep(delay)
        return Success(provider.effect(ctx.operation_id))

    return effect


async def test_pending_waits_for_the_running_attempt_then_replays(
    client: idemd.Client, provider: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    k = key()
    started = asyncio.Event()
    first = asyncio.create_task(execute_once(client, OP, k, PAYLOAD, started_charging(provider, started, 0.4)))
    await started.wait()
    waits: list[float | None] = []
    send_claim = client.send_claim

    async def spy(request: pb.ClaimRequest, **kw: Any) -> Any:
        waits.append(request.wait.ToTimedelta().total_seconds() if request.HasField("wait") else None)
        return await send_claim(request, **kw)

    monkeypatch.setattr(client, "send_claim", spy)
    second = await execute_once(client, OP, k, PAYLOAD, charging(provider))
    assert second.replayed and second.body == (await first).body
    assert len(provider.effects) == 1
    # Told Pending, it claimed again with a server-side wait instead of polling.
    assert waits[0] is None and len(waits) == 2 and waits[1] is not None and waits[1] > 1, waits


async def test_pending_past_the_deadline_raises_without_running(client: idemd.Client, provider: Provider) -> None:
    k = key()
    started = asyncio.Event()
    first = asyncio.create_task(execute_once(client, OP, k, PAYLOAD, started_charging(provider, started, 0.3)))
    await started.wait()
    with pytest.raises(idemd.PendingError) as pending:
        await execute_once(client, OP, k, PAYLOAD, charging(provider), deadline=0)
    assert pending.value.retry_after > 0 and pending.value.reason == "PENDING_REASON_IN_PROGRESS"
    await first
    assert len(provider.effects) == 1


async def test_reconcile_first_with_a_deduplicating_provider_runs_with_the_context(
    client: idemd.Client, provider: Provider
) -> None:
    k = key()
    stalled = await abandoned_attempt(client, k, attempt=2.0)
    seen: list[EffectContext] = []
    result = await execute_once(client, OP, k, PAYLOAD, charging(provider, seen), lease=1, attempt_duration=2.0,
                                provider_deduplicates=True)
    ctx = seen[0]
    assert ctx.previous_outcome_unknown and ctx.attempt == 2 and ctx.previous_fence == stalled.fence
    assert ctx.operation_id == stalled.operation_id == result.operation_id  # the provider's key
    # What is left of the abandoned attempt (2 s long, its lease long gone).
    assert ctx.previous_attempt_deadline is not None and 0 < ctx.previous_attempt_deadline <= 2.0
    assert ctx.previous_attempt_settles_at is not None


async def test_reconcile_first_without_a_lookup_or_deduplication_declines_and_never_runs(
    client: idemd.Client, provider: Provider
) -> None:
    """Issue 17 item 3: the call site said neither how to look the provider up nor that
    the provider deduplicates, so nothing can tell whether the earlier attempt took
    effect: no effect, Fail NOT_STARTED (the earlier doubt and deadline kept), and an
    error that says what to do."""
    k = key()
    stalled = await abandoned_attempt(client, k, attempt=3.0)
    before = (await client.lookup(operation_id=stalled.operation_id)).operation
    with pytest.raises(idemd.OutcomeUnknownError) as unknown:
        await execute_once(client, OP, k, PAYLOAD, charging(provider), lease=1, attempt_duration=3.0)
    assert provider.effects == []
    message = str(unknown.value)
    assert "pass a lookup" in message and "provider_deduplicates" in message and "reconcile" in message
    found = await client.lookup(operation_id=stalled.operation_id, include_history=True)
    entries = [entry for entry in found.history if entry.event != "RENEWED"]
    assert [entry.event for entry in entries] == ["CLAIMED", "TAKEN_OVER", "OUTCOME_UNKNOWN"], entries
    assert entries[-1].detail == "not_started" and entries[-1].attempt == 2
    # Handed on as it was: the doubt still ends with the abandoned attempt's deadline.
    assert found.operation.attempt_deadline_at == before.attempt_deadline_at
    # The next call, still without either, declines again rather than running.
    with pytest.raises(idemd.OutcomeUnknownError):
        await execute_once(client, OP, k, PAYLOAD, charging(provider), lease=1, attempt_duration=3.0)
    assert provider.effects == []


async def test_a_negative_lookup_that_began_before_the_earlier_deadline_is_not_trusted(
    client: idemd.Client, provider: Provider
) -> None:
    """Issue 17 item 1, scaled down: a lookup reads the provider as it starts, before
    the earlier owner's charge lands (0.3 s before that owner's deadline), and answers
    "nothing" only after the deadline. Its answer must not count: the effect would run
    a second time. The lookup asked again finds the earlier charge, which is recorded."""
    k = key()
    # The earlier owner: a 3 s attempt, a 2 s lease; its charge lands 2.7 s after its
    # Claim and it never reports (it crashed, or its Complete was lost).
    claimed = await client.claim(OP, k, json_payload=JSON, lease=2.0, max_attempt_duration=3.0)
    earlier = claimed.acquired.ownership
    claimed_at = time.monotonic()
    landed: list[float] = []

    def land() -> None:
        landed.append(time.monotonic())
        provider.effect(earlier.operation_id)

    asyncio.get_running_loop().call_later(2.7, land)
    lookups: list[tuple[float, float, float, bool]] = []

    async def slow_lookup(ctx: EffectContext) -> Success | None:
        started = time.monotonic()
        body = provider.records.get(ctx.operation_id)  # the provider as it is now
        await asyncio.sleep(1.0)
        assert ctx.previous_attempt_settles_at is not None
        lookups.append((started, time.monotonic(), ctx.previous_attempt_settles_at, body is not None))
        return Success(body) if body else None

    # The takeover claims just after the earlier lease ran out: its own attempt ends
    # 2.2 s after the earlier one, room for a lookup that straddles the earlier
    # deadline and another one after it.
    await asyncio.sleep(max(0.0, claimed_at + 2.2 - time.monotonic()))
    result = await execute_once(client, OP, k, PAYLOAD, charging(provider), lookup=slow_lookup,
                                lease=2.0, attempt_duration=3.0, lookup_interval=0.1)
    assert len(provider.effects) == 1, lookups
    assert result.body == provider.records[earlier.operation_id] and result.attempts == 2 and not result.replayed
    # The scenario happened as described: the first lookup began before the charge
    # landed and answered "nothing" after the earlier attempt had settled.
    started, answered, settles_at, found = lookups[0]
    assert started < landed[0] < settles_at < answered and not found, (lookups, landed)
    assert lookups[-1][3], lookups


def test_previous_attempt_deadline_from_the_server_is_counted_from_the_reply() -> None:
    first = pb.ReconcileFirst(ownership=pb.Ownership(attempt_deadline=duration(300)))
    assert previous_attempt_settles_at(first, 100.0) == (None, 400.0)
    first.previous_attempt_deadline.CopyFrom(duration(2.5))
    assert previous_attempt_settles_at(first, 100.0) == (2.5, 102.5)


async def test_a_negative_lookup_is_not_trusted_while_the_earlier_attempt_may_run(
    client: idemd.Client, provider: Provider
) -> None:
    k = key()
    before = time.monotonic()
    await abandoned_attempt(client, k, attempt=1.0)
    lookups: list[float] = []
    ran: list[float] = []

    async def lookup(ctx: EffectContext) -> Success | None:
        lookups.append(time.monotonic())
        return None

    async def effect(ctx: EffectContext) -> Success:
        ran.append(time.monotonic())
        return Success(provider.effect(ctx.operation_id))

    # The earlier attempt's doubt lasts as long as this attempt: it looks, declines
    # (NOT_STARTED), and the next attempt waits the doubt out, then runs.
    result = await execute_once(client, OP, k, PAYLOAD, effect, lookup=lookup,
                                lease=0.3, attempt_duration=1.0, lookup_interval=0.2)
    # Usually the taking-over attempt declines and a third waits the doubt out; on a slow
    # machine the takeover comes late enough for its own attempt to outlast the doubt,
    # and it runs then. Either way: after the doubt, once.
    assert len(provider.effects) == 1 and len(lookups) >= 2 and result.attempts in (2, 3)
    # Never before the earlier attempt's deadline (1 s after its Claim, sent after `before`).
    assert ran[0] >= before + 1.0 - 0.05, ran[0] - before


async def test_a_lookup_that_finds_the_earlier_effect_records_it(client: idemd.Client, provider: Provider) -> None:
    k = key()
    stalled = await abandoned_attempt(client, k, attempt=2.0)

    async def lands_late() -> None:  # the stalled owner's effect lands meanwhile
        await asyncio.sleep(0.3)
        provider.effect(stalled.operation_id)

    landing = asyncio.create_task(lands_late())

    async def lookup(ctx: EffectContext) -> Success | None:
        body = provider.records.get(ctx.operation_id)
        return Success(body) if body else None

    result = await execute_once(client, OP, k, PAYLOAD, charging(provider), lookup=lookup,
                                lease=0.5, attempt_duration=2.0, lookup_interval=0.1)
    await landing
    assert len(provider.effects) == 1 and result.body == provider.records[stalled.operation_id]
    again = await execute_once(client, OP, k, PAYLOAD, charging(provider))
    assert again.replayed and again.body == result.body and len(provider.effects) == 1


async def test_lease_lost_looks_up_and_never_redoes(
    client: idemd.Client, proxy: Proxy, proxied: idemd.Client, provider: Provider
) -> None:
    k = key()
    taken_over = asyncio.Event()

    async def effect(ctx: EffectContext) -> Success:
        provider.effect(ctx.operation_id)
        proxy.cut()  # this owner's renewals fail; its lease lapses
        await asyncio.sleep(0.8)
        other = await client.claim(OP, k, json_payload='{"amount":1000,"currency":"EUR"}', lease=5)
        owner = other.reconcile_first.ownership
        await client.complete(owner.operation_id, owner.fence, b"reconciled by another owner")
        taken_over.set()
        proxy.restore()
        return Success(b"mine")

    # A 0.5 s lease: 0.15 s could leave too little on a loaded machine (declined).
    result = await execute_once(proxied, OP, k, PAYLOAD, effect, lease=0.5, attempt_duration=5)
    assert taken_over.is_set()
    assert result.body == b"reconciled by another owner" and result.replayed
    assert len(provider.effects) == 1
    events = await history(client, result.operation_id)
    assert "STALE_WRITE_REFUSED" in events, events


async def test_needs_reconciliation_never_executes(client: idemd.Client, provider: Provider) -> None:
    k = key()
    stalled = await abandoned_attempt(client, k, max_attempts=1)
    with pytest.raises(idemd.NeedsReconciliationError) as needs:
        await execute_once(client, OP, k, PAYLOAD, charging(provider), max_attempts=1)
    assert needs.value.operation_id == stalled.operation_id and provider.effects == []


class _NoOutcome:
    async def send_claim(self, request: pb.ClaimRequest, **kw: Any) -> tuple[pb.ClaimResponse, float]:
        return pb.ClaimResponse(), time.monotonic()

    def claim_request(self, *args: Any, **kw: Any) -> pb.ClaimRequest:
        return idemd.Client.claim_request(*args, **kw)


async def test_an_unknown_outcome_never_executes(provider: Provider) -> None:
    with pytest.raises(idemd.errors.UnrecognisedOutcomeError):
        await execute_once(_NoOutcome(), OP, key(), PAYLOAD, charging(provider))  # type: ignore[arg-type]
    assert provider.effects == []


async def test_conflict(client: idemd.Client, provider: Provider) -> None:
    k = key()
    first = await execute_once(client, OP, k, PAYLOAD, charging(provider))
    with pytest.raises(idemd.ConflictError) as conflict:
        await execute_once(client, OP, k, {"amount": 2000, "currency": "EUR"}, charging(provider))
    assert conflict.value.operation_id == first.operation_id and len(provider.effects) == 1


async def test_renewals_stop_once_the_lease_reaches_the_attempt_deadline(client: idemd.Client) -> None:
    async def hangs(ctx: EffectContext) -> Success:
        await asyncio.sleep(60)
        return Success(b"never")

    with pytest.raises(idemd.AttemptTimeoutError) as timeout:
        # Seconds, not tenths: on a loaded machine a Renew due 0.2 s in could arrive past
        # a 0.8 s deadline.
        await execute_once(client, OP, key(), PAYLOAD, hangs, lease=3, attempt_duration=4)
    # The first Renew (a third into the lease) is granted up to the deadline; renewing
    # again could only shrink towards it, call after call.
    entries = await history_entries(client, timeout.value.operation_id)
    renewed = sum(entry.count for entry in entries if entry.event == "RENEWED")
    # (A second one when the first was granted a hair short of the deadline: the Claim
    # took longer to reach the server than the Renew did. Without the stop, three or more.)
    assert 1 <= renewed <= 2, [(entry.event, entry.count) for entry in entries]


def recording(provider: Provider, attempts: list[int]) -> Any:
    """The effect, recording the attempt it ran on."""
    async def effect(ctx: EffectContext) -> Success:
        attempts.append(ctx.attempt)
        return Success(provider.effect(ctx.operation_id))

    return effect


async def history_entries(client: idemd.Client, operation_id: str) -> list[pb.HistoryEntry]:
    found = await client.lookup(operation_id=operation_id, include_history=True)
    return list(found.history)


async def test_a_lease_nearly_spent_on_arrival_is_renewed_before_the_effect(
    proxy: Proxy, proxied: idemd.Client, client: idemd.Client, provider: Provider
) -> None:
    # The Claim's reply arrives with 200 ms of a 1 s lease left (counted from its
    # send), less than the least the effect starts with (a third of the lease): the
    # attempt renews, and the Renew's lease counts from the Renew's send.
    proxy.delay_replies(0.8)
    attempts: list[int] = []
    result = await execute_once(proxied, OP, key(), PAYLOAD, recording(provider, attempts),
                                lease=1.0, attempt_duration=5.0)
    assert proxy.delayed == 1
    assert attempts == [1] and result.attempts == 1 and len(provider.effects) == 1
    assert await history(client, result.operation_id) == ["CLAIMED", "RENEWED", "COMPLETED"]


async def test_too_little_lease_left_never_starts_the_effect(
    proxy: Proxy, proxied: idemd.Client, client: idemd.Client, provider: Provider
) -> None:
    # The Claim's reply and the Renew's both arrive with 200 ms of a 1 s lease left:
    # attempt 1 declines (Fail NOT_STARTED: released at once) and attempt 2 runs.
    proxy.delay_replies(0.8, 0.8)
    attempts: list[int] = []
    result = await execute_once(proxied, OP, key(), PAYLOAD, recording(provider, attempts),
                                lease=1.0, attempt_duration=5.0)
    assert attempts == [2] and result.attempts == 2 and len(provider.effects) == 1
    entries = await history_entries(client, result.operation_id)
    # A Renew of attempt 1 still in flight when it declined lands refused, harmlessly.
    events = [entry.event for entry in entries if (entry.event, entry.detail) != ("STALE_WRITE_REFUSED", "renew")]
    assert events == ["CLAIMED", "RENEWED", "RETRY_SCHEDULED", "RETRY_STARTED", "COMPLETED"], entries
    assert entries[2].detail == "not_started"


async def test_a_declined_takeover_hands_on_the_earlier_attempts_doubt(
    client: idemd.Client, provider: Provider
) -> None:
    """The long fault run's liveness failure: an attempt that declines because the doubt
    it took over outlasts it must not push the doubt forward. The next attempt is told
    the earlier attempt's deadline, waits it out and runs."""
    k = key()
    # Attempt 1 claims with a 2 s lease and crashes: its effect may run until its
    # deadline, 4 s after its Claim.
    first = await client.claim(OP, k, json_payload='{"amount":1000,"currency":"EUR"}',
                               lease=2.0, max_attempt_duration=4.0, claim_token=b"crashed-attempt")
    first_replied = time.monotonic()
    assert first.WhichOneof("outcome") == "acquired"
    # This call's Claim waits (long poll) until attempt 1's lease runs out, 2 s after
    # it was sent: its attempt (2) counts 4 s from that send, so it would end (less
    # its margin) before attempt 1's doubt does. It declines; attempt 3 is told
    # attempt 1's deadline, not attempt 2's.
    told: list[tuple[int, float]] = []

    async def lookup(ctx: EffectContext) -> Success | None:
        assert ctx.previous_attempt_settles_at is not None
        told.append((ctx.attempt, ctx.previous_attempt_settles_at))
        body = provider.records.get(ctx.operation_id)
        return Success(body) if body else None

    attempts: list[int] = []
    result = await execute_once(client, OP, k, PAYLOAD, recording(provider, attempts), lookup=lookup,
                                lease=3.0, attempt_duration=4.0)
    entries = await history_entries(client, result.operation_id)
    assert len(provider.effects) == 1
    assert attempts == [3], ([(e.event, e.attempt, e.detail) for e in entries], told, first_replied)
    assert {attempt for attempt, _ in told} == {2, 3}, told
    for attempt, settles_at in told:
        # Measured from a reply that came at most a little later.
        assert settles_at <= first_replied + 4.0 + 0.7, (
            f"attempt {attempt} was told the doubt lasts {settles_at - first_replied - 4.0:.3f}s "
            "past attempt 1's deadline"
        )
    # Attempt 2 renewed while it waited; the rest is one line each.
    entries = [entry for entry in entries if entry.event != "RENEWED"]
    events = [entry.event for entry in entries]
    assert events == ["CLAIMED", "TAKEN_OVER", "OUTCOME_UNKNOWN", "TAKEN_OVER", "COMPLETED"], entries
    assert entries[2].detail == "not_started"


async def test_a_resent_claim_counts_its_attempt_from_the_answered_send(
    server: Any, proxy: Proxy, client: idemd.Client, provider: Provider
) -> None:
    # The first send's reply is held for 2 s, and (the proxy relays bytes in order)
    # every reply behind it on that connection: the sends at 0 and ~0.8 s time out
    # after 800 ms, and the one at ~1.6 s is answered at ~2 s with what is left of the
    # 3.5 s attempt at its handling (~1.9 s). Counted from that send, the attempt is
    # cancelled at ~3.15 s (less its 0.35 s margin): plenty. Counted from the first
    # send, at ~1.55 s, before the answer even arrived: attempt 1 would decline and
    # attempt 2 run.
    proxy.delay_replies(2.0)
    policy = idemd.RetryPolicy(initial_backoff=0.02, max_backoff=0.2, call_timeout=0.8)
    attempts: list[int] = []
    started = time.monotonic()
    async with idemd.Client(proxy.addr, server.token, retry=policy) as resending:
        result = await execute_once(resending, OP, key(), PAYLOAD, recording(provider, attempts),
                                    lease=3.0, attempt_duration=3.5)
    # The held reply was waited out: the Claim was re-sent past the call timeout.
    assert proxy.delayed == 1 and time.monotonic() - started >= 2.0
    assert attempts == [1] and result.attempts == 1 and len(provider.effects) == 1
    events = [event for event in await history(client, result.operation_id) if event != "RENEWED"]
    assert events == ["CLAIMED", "COMPLETED"], events
