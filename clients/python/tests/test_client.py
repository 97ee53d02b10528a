"""Item: a typed wrapper over every RPC, bearer token on every call, google.rpc details
decoded into typed exceptions. Against a real server on each store."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest
from google.protobuf import duration_pb2

import idemd
from idemd import errors
from idemd.proto import error_details_pb2, pack_detail, pb, status_pb2

from conftest import Server, key

JSON = '{"amount":1000,"currency":"EUR"}'


async def test_every_rpc_round_trips(client: idemd.Client) -> None:
    k = key()
    claimed = await client.claim("payments.charge", k, json_payload=JSON, lease=5, claim_token=b"t1")
    assert claimed.WhichOneof("outcome") == "acquired"
    owner = claimed.acquired.ownership
    assert owner.attempt == 1 and owner.fence > 0
    renewed = await client.renew(owner.operation_id, owner.fence, lease=5)
    assert renewed.lease.seconds <= 5
    done = await client.complete(owner.operation_id, owner.fence, b'{"charge":"ch_1"}',
                                 content_type="application/json", metadata={"provider": "fake"})
    assert done.state == pb.OPERATION_STATE_SUCCEEDED
    replay = await client.claim("payments.charge", k, json_payload='{"currency":"EUR","amount":1000}')
    assert replay.WhichOneof("outcome") == "completed"
    assert replay.completed.result.body == b'{"charge":"ch_1"}'
    assert dict(replay.completed.result.metadata) == {"provider": "fake"}
    found = await client.lookup(operation="payments.charge", key=k, include_history=True)
    assert found.operation.operation_id == owner.operation_id
    assert [h.event for h in found.history] == ["CLAIMED", "RENEWED", "COMPLETED"]
    by_id = await client.lookup(operation_id=owner.operation_id)
    assert by_id.operation.state == pb.OPERATION_STATE_SUCCEEDED

    # Fail UNKNOWN, then a reconciler finds it in ListUnresolved and settles it.
    other = await client.claim("payments.charge", key(), bytes_payload=b"x", lease=5)
    ownership = other.acquired.ownership
    failed = await client.fail(ownership.operation_id, ownership.fence, pb.FAIL_DISPOSITION_UNKNOWN,
                               code="timeout", message="provider timed out")
    assert failed.state == pb.OPERATION_STATE_UNKNOWN
    page = await client.list_unresolved(operation="payments.charge", page_size=10)
    assert ownership.operation_id in [op.operation_id for op in page.operations]
    settled = await client.reconcile(ownership.operation_id, ownership.fence,
                                     succeeded=pb.Result(body=b"found"))
    assert settled.state == pb.OPERATION_STATE_SUCCEEDED and settled.fence > ownership.fence


async def test_retryable_failure_and_terminal_failure(client: idemd.Client) -> None:
    claimed = await client.claim("jobs.run", key(), bytes_payload=b"job")
    owner = claimed.acquired.ownership
    retry = await client.fail(owner.operation_id, owner.fence, pb.FAIL_DISPOSITION_RETRYABLE,
                              code="busy", retry_after=0.01)
    assert retry.state == pb.OPERATION_STATE_RETRY_WAIT
    claimed = await client.claim("jobs.run", key(), bytes_payload=b"job2")
    owner = claimed.acquired.ownership
    final = await client.fail(owner.operation_id, owner.fence, pb.FAIL_DISPOSITION_TERMINAL,
                              code="card_declined")
    assert final.state == pb.OPERATION_STATE_FAILED


async def test_refusals_are_typed_exceptions(client: idemd.Client) -> None:
    k = key()
    first = (await client.claim("payments.charge", k, json_payload=JSON, lease=0.05)).acquired.ownership

    with pytest.raises(idemd.ConflictError) as conflict:
        await client.claim("payments.charge", k, json_payload='{"amount":2000,"currency":"EUR"}')
    assert conflict.value.reason == "IDEMPOTENCY_KEY_REUSED"
    assert conflict.value.operation_id == first.operation_id
    assert conflict.value.code == grpc.StatusCode.FAILED_PRECONDITION

    await asyncio.sleep(0.1)  # the first owner's lease runs out
    taken = await client.claim("payments.charge", k, json_payload=JSON, lease=5)
    assert taken.WhichOneof("outcome") == "reconcile_first"
    second = taken.reconcile_first.ownership
    with pytest.raises(idemd.LeaseLostError) as lost:
        await client.complete(first.operation_id, first.fence, b"late")
    assert lost.value.current_fence == second.fence
    assert lost.value.state == "IN_PROGRESS"
    assert lost.value.operation_id == first.operation_id

    await client.complete(second.operation_id, second.fence, b"one")
    with pytest.raises(idemd.RequestMismatchError):
        await client.complete(second.operation_id, second.fence, b"two")
    with pytest.raises(idemd.OperationTerminalError) as terminal:
        await client.renew(second.operation_id, second.fence)
    assert terminal.value.state == "SUCCEEDED"

    with pytest.raises(idemd.InvalidArgumentError) as invalid:
        await client.claim("payments charge!", "", json_payload="{")
    fields = {v.field for v in invalid.value.violations}
    assert {"scope.key", "scope.operation"} <= fields, fields
    assert invalid.value.reason == "INVALID_REQUEST"

    with pytest.raises(idemd.NotFoundError) as missing:
        await client.lookup(operation_id="01a2269b-92ba-727d-ab2a-b74a6876d78e")
    assert missing.value.reason == "OPERATION_NOT_FOUND"


async def test_the_bearer_token_goes_on_every_call(server: Server) -> None:
    async with idemd.Client(server.addr, "idem_" + "0" * 64) as stranger:
        with pytest.raises(idemd.UnauthenticatedError) as refused:
            await stranger.claim("payments.charge", key(), json_payload=JSON)
        assert refused.value.reason == "INVALID_CREDENTIALS"
        with pytest.raises(idemd.UnauthenticatedError):
            await stranger.list_unresolved()
    async with idemd.Client(server.addr, server.token) as owner:  # type: ignore[attr-defined]
        assert (await owner.list_unresolved()).operations is not None


async def _ledger_and_mail(client: idemd.Client) -> tuple[list[str], str]:
    """Three ledger.post operations (the last one UNKNOWN) and two mail.send ones: the
    ledger ones' ids in the order they were created, and the UNKNOWN one's."""
    ledger = []
    for n in range(3):
        owner = (await client.claim("ledger.post", key(), bytes_payload=b"%d" % n, lease=5)).acquired.ownership
        ledger.append(owner.operation_id)
    await client.fail(owner.operation_id, owner.fence, pb.FAIL_DISPOSITION_UNKNOWN, code="timeout")
    for n in range(2):
        await client.claim("mail.send", key(), bytes_payload=b"%d" % n, lease=5)
    return ledger, owner.operation_id


async def test_list_operations_filters_and_pages(client: idemd.Client) -> None:
    ledger, unknown = await _ledger_and_mail(client)

    page = await client.list_operations(filter="op:ledger.*")
    assert [op.operation_id for op in page.operations] == ledger
    assert page.next_page_token == ""
    assert all(op.scope.operation == "ledger.post" for op in page.operations)
    only = await client.list_operations(filter="op:ledger.* state:unknown")
    assert [op.operation_id for op in only.operations] == [unknown]
    assert only.operations[0].state == pb.OPERATION_STATE_UNKNOWN
    everything = await client.list_operations()
    assert len(everything.operations) == 5
    newest = await client.list_operations(filter="op:ledger.*", order=pb.ListOperationsRequest.ORDER_NEWEST_FIRST)
    assert [op.operation_id for op in newest.operations] == ledger[::-1]

    # One at a time: each once, in order, and the last page says there is no more.
    seen: list[str] = []
    token = ""
    for _ in range(10):
        page = await client.list_operations(filter="op:ledger.*", page_size=1, page_token=token)
        assert len(page.operations) <= 1
        seen += [op.operation_id for op in page.operations]
        token = page.next_page_token
        if not token:
            break
    assert seen == ledger


async def test_list_operations_refusals(server: Server, client: idemd.Client) -> None:
    with pytest.raises(idemd.InvalidArgumentError) as invalid:
        await client.list_operations(filter="op:ledger.* age:10m")
    assert invalid.value.reason == "INVALID_REQUEST"
    assert invalid.value.code == grpc.StatusCode.INVALID_ARGUMENT
    [violation] = invalid.value.violations
    assert violation.field == "filter"
    assert violation.description.startswith("at character 16: `age` takes"), violation.description

    # A token of the operations scope alone may claim, not list.
    name = f"py-ops-{key()[2:14]}"
    operations_only = server.run("tenant", "create", name, "--scopes", "operations")
    async with idemd.Client(server.addr, operations_only) as caller:
        await caller.claim("ledger.post", key(), bytes_payload=b"x")
        with pytest.raises(errors.PermissionDeniedError) as denied:
            await caller.list_operations(filter="op:ledger.*")
    assert denied.value.reason == "MISSING_SCOPE"
    assert denied.value.code == grpc.StatusCode.PERMISSION_DENIED
    assert denied.value.metadata.get("scope") == "reconcile", denied.value.metadata


@pytest.fixture
def server_env() -> dict[str, str]:
    return {"IDEMD_SWEEP_INTERVAL": "50ms"}


async def test_result_expired(client: idemd.Client) -> None:
    k = key()
    # Retention as short as the server allows: never below the retry window (one attempt
    # of two seconds here).
    owner = (
        await client.claim(
            "reports.send", k, bytes_payload=b"r", lease=1, max_attempt_duration=2, max_attempts=1, retention=2
        )
    ).acquired.ownership
    await client.complete(owner.operation_id, owner.fence, b"sent")
    end = time.monotonic() + 10
    while True:
        try:
            await client.claim("reports.send", k, bytes_payload=b"r")
        except idemd.ResultExpiredError as refused:
            expired = refused
            break
        assert time.monotonic() < end, "the sweeper never made a tombstone"
        await asyncio.sleep(0.05)
    assert expired.operation_id == owner.operation_id


async def test_a_dead_address_is_unavailable_without_a_reason() -> None:
    policy = idemd.RetryPolicy(max_sends=2, initial_backoff=0.01, call_timeout=2)
    async with idemd.Client("127.0.0.1:1", "t", retry=policy) as nowhere:
        with pytest.raises(idemd.UnavailableError) as unavailable:
            await nowhere.lookup(operation_id="x")
    assert unavailable.value.reason is None


def _status(code: grpc.StatusCode, *details: object) -> bytes:
    status = status_pb2.Status(code=code.value[0], message="m")
    for detail in details:
        status.details.append(pack_detail(detail))  # type: ignore[arg-type]
    return status.SerializeToString()


def test_retry_info_and_codes_without_a_server() -> None:
    info = error_details_pb2.ErrorInfo(reason="STORE_UNAVAILABLE", domain="idem.v1")
    retry = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(nanos=200_000_000))
    unavailable = errors.from_status(
        grpc.StatusCode.UNAVAILABLE, "busy", _status(grpc.StatusCode.UNAVAILABLE, info, retry)
    )
    assert isinstance(unavailable, idemd.UnavailableError)
    assert unavailable.retry_after == pytest.approx(0.2)
    assert unavailable.reason == "STORE_UNAVAILABLE"
    exhausted = errors.from_status(grpc.StatusCode.RESOURCE_EXHAUSTED, "shed",
                                   _status(grpc.StatusCode.RESOURCE_EXHAUSTED, retry))
    assert isinstance(exhausted, idemd.ResourceExhaustedError) and exhausted.retry_after == pytest.approx(0.2)
    garbage = errors.from_status(grpc.StatusCode.INTERNAL, "x", b"\xff\xff not a status")
    assert isinstance(garbage, errors.InternalError) and garbage.reason is None
    for reason, cls in [
        ("RESULT_EXPIRED", idemd.ResultExpiredError),
        ("LEASE_STILL_LIVE", errors.LeaseStillLiveError),
        ("ATTEMPT_STILL_RUNNING", errors.AttemptStillRunningError),
        ("ATTEMPT_DEADLINE_PASSED", errors.AttemptDeadlinePassedError),
        ("STATE_FORBIDS", errors.StateForbidsError),
    ]:
        detail = error_details_pb2.ErrorInfo(reason=reason, domain="idem.v1", metadata={"operation_id": "o"})
        err = errors.from_status(
            grpc.StatusCode.FAILED_PRECONDITION, "", _status(grpc.StatusCode.FAILED_PRECONDITION, detail)
        )
        assert type(err) is cls and err.operation_id == "o"
    assert type(errors.from_status(grpc.StatusCode.PERMISSION_DENIED, "", None)) is errors.PermissionDeniedError
