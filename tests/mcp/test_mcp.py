"""`idemd mcp` driven by a real MCP client (PyPI's `mcp` SDK, over stdio) against a real
idemd server on the embedded store. Operations are made through the API itself (the
Connect protocol's JSON mapping, plain HTTP), and every change a tool claims is checked
by reading the operation back through the API, not through the tool that made it.

IDEMD_BIN names the binary (tests/mcp/run-tests sets it).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client

SERVICE = "idem.v1.IdempotencyService"
RECONCILE_SCOPED = {"list_unresolved", "reconcile"}
PRIVATE_KEY = (
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----"
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def idemd_bin() -> str:
    binary = os.environ.get("IDEMD_BIN", "")
    if not Path(binary).is_file():
        # A failure, not a skip: a suite that ran without its server tested nothing.
        pytest.fail(f"IDEMD_BIN names no binary ({binary!r}): tests/mcp/run-tests sets it")
    return binary


@dataclass
class Idemd:
    """A running idemd server, one tenant, and a token of each kind."""

    binary: str
    addr: str
    operations_token: str
    reconcile_token: str
    tmp: Path

    def call(self, method: str, body: dict[str, Any], token: str | None = None) -> dict[str, Any]:
        """One RPC over the Connect protocol's JSON mapping; raises on a refusal."""
        request = urllib.request.Request(
            f"http://{self.addr}/{SERVICE}/{method}",
            data=json.dumps(body).encode(),
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {token or self.reconcile_token}",
            },
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def lookup(self, operation_id: str) -> dict[str, Any]:
        return self.call("Lookup", {"operationId": operation_id})["operation"]

    def claim(self, key: str, payload: dict[str, Any]) -> dict[str, Any]:
        return self.call(
            "Claim",
            {"scope": {"operation": "payments.charge", "key": key}, "jsonPayload": json.dumps(payload)},
            self.operations_token,
        )

    def succeeded(self, key: str, body: bytes) -> tuple[str, str]:
        """An operation claimed and completed: its id and fence."""
        # One request per key: the same request under many keys is what
        # Diagnose's new-key-per-retry watch flags.
        ownership = self.claim(key, {"amount": 1000, "order": key})["acquired"]["ownership"]
        self.call(
            "Complete",
            {
                "operationId": ownership["operationId"],
                "fence": ownership["fence"],
                "result": {"body": base64.b64encode(body).decode(), "contentType": "application/json"},
            },
            self.operations_token,
        )
        return ownership["operationId"], ownership["fence"]

    def unknown(self, key: str) -> tuple[str, str]:
        """An operation whose owner reported an unknown outcome: its id and fence."""
        ownership = self.claim(key, {"amount": 2500, "order": key})["acquired"]["ownership"]
        done = self.call(
            "Fail",
            {
                "operationId": ownership["operationId"],
                "fence": ownership["fence"],
                "disposition": "FAIL_DISPOSITION_UNKNOWN",
                "error": {"code": "gateway_timeout", "message": "no answer from the provider"},
            },
            self.operations_token,
        )
        assert done["state"] == "OPERATION_STATE_UNKNOWN"
        return ownership["operationId"], ownership["fence"]


def run(binary: str, env: dict[str, str], *args: str) -> str:
    done = subprocess.run([binary, *args], env=env, capture_output=True, timeout=60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"idemd {' '.join(args)} failed: {done.stderr.decode()}")
    return done.stdout.decode().strip()


@pytest.fixture(scope="module")
def idemd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Idemd]:
    binary = idemd_bin()
    tmp = tmp_path_factory.mktemp("idemd")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "IDEMD_DATA_DIR": str(tmp / "data"),
        "IDEMD_METRICS_LISTEN": "off",
        # Plaintext on loopback; serve refuses that unless asked.
        "IDEMD_INSECURE_PLAINTEXT": "true",
        "IDEMD_LOG_FORMAT": "json",
        "RUST_LOG": "info",
    }
    # The tenant's first token may only call the operations RPCs; a second one
    # may reconcile too. Both are made before the server starts (one writer).
    tenant = f"mcp-{uuid.uuid4().hex[:12]}"
    operations_token = run(binary, env, "tenant", "create", tenant, "--scopes", "operations")
    reconcile_token = run(
        binary, env, "tenant", "token", "create", tenant, "--name", "reconciler", "--scopes", "operations,reconcile"
    )
    log = tmp / "serve.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        addr = ""
        deadline = time.monotonic() + 30
        while not addr:
            for line in log.read_text(errors="replace").splitlines():
                if '"idemd serving"' in line:
                    addr = json.loads(line)["listen"]
            if process.poll() is not None:
                raise RuntimeError(f"idemd exited: {log.read_text()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"idemd did not start: {log.read_text()}")
            time.sleep(0.02)
        yield Idemd(binary, addr, operations_token, reconcile_token, tmp)
    finally:
        process.kill()
        process.wait()


@asynccontextmanager
async def mcp_session(
    idemd: Idemd, token: str, errlog: Path | None = None, rust_log: str = "info"
) -> AsyncIterator[ClientSession]:
    """`idemd mcp` as an MCP client launches it: a child process on stdio."""
    parameters = StdioServerParameters(
        command=idemd.binary,
        args=["mcp"],
        env={"IDEMD_ADDR": idemd.addr, "IDEMD_TOKEN": token, "RUST_LOG": rust_log},
    )
    errlog = errlog or idemd.tmp / f"mcp-{uuid.uuid4().hex[:8]}.log"
    with errlog.open("w") as stderr:
        async with (
            stdio_client(parameters, errlog=stderr) as (read, write),
            ClientSession(read, write, read_timeout_seconds=30) as session,
        ):
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """A tool's answer: whether it is an error, and its JSON document."""
    result = await session.call_tool(tool, arguments)
    document = result.structured_content
    if document is None:
        # The JSON is also the text content (clients that ignore structured content).
        document = json.loads(result.content[0].text)
    return bool(result.is_error), document


def key() -> str:
    return f"order-{uuid.uuid4().hex[:12]}"


async def tool_names(idemd: Idemd, token: str) -> set[str]:
    async with mcp_session(idemd, token) as session:
        return {tool.name for tool in (await session.list_tools()).tools}


async def test_reconcile_scoped_tools_are_offered_only_to_a_reconcile_credential(idemd: Idemd) -> None:
    assert await tool_names(idemd, idemd.operations_token) == {"lookup", "diagnose"}
    assert await tool_names(idemd, idemd.reconcile_token) == {"lookup", "diagnose"} | RECONCILE_SCOPED


async def test_reconcile_says_it_needs_an_explicit_confirmation(idemd: Idemd) -> None:
    async with mcp_session(idemd, idemd.reconcile_token) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    reconcile = tools["reconcile"]
    assert "confirm: true" in (reconcile.description or "")
    assert "confirm" in reconcile.input_schema["properties"]
    assert set(reconcile.input_schema["required"]) >= {"operation_id", "expected_fence", "resolution"}
    assert reconcile.annotations is not None and reconcile.annotations.destructive_hint is True
    assert tools["lookup"].annotations is not None and tools["lookup"].annotations.read_only_hint is True
    # Every tool tells the agent never to execute an effect whose outcome is open.
    for tool in tools.values():
        assert "Never execute" in (tool.description or ""), tool.name
        assert "UNKNOWN" in (tool.description or ""), tool.name


async def test_lookup_returns_the_operation_its_state_fence_and_result(idemd: Idemd) -> None:
    scope_key = key()
    body = b'{"charge":"ch_1"}'
    operation_id, fence = idemd.succeeded(scope_key, body)
    async with mcp_session(idemd, idemd.operations_token) as session:
        error, by_id = await call(session, "lookup", {"operation_id": operation_id})
        assert not error, by_id
        _, by_key = await call(session, "lookup", {"operation": "payments.charge", "key": scope_key})
        _, with_history = await call(session, "lookup", {"operation_id": operation_id, "include_history": True})
    for document in (by_id, by_key):
        assert document["operation"]["operationId"] == operation_id
        assert document["operation"]["state"] == "OPERATION_STATE_SUCCEEDED"
        assert document["operation"]["fence"] == fence
        assert base64.b64decode(document["operation"]["result"]["body"]) == body
        assert document["result_body_text"] == body.decode()
        assert document["answer"]
        assert "history" not in document
    assert [entry["event"] for entry in with_history["history"]] == ["CLAIMED", "COMPLETED"]


async def test_lookup_leaves_a_large_result_body_out_and_says_how_large(idemd: Idemd) -> None:
    body = json.dumps({"receipt": "x" * 20_000}).encode()
    operation_id, _ = idemd.succeeded(key(), body)
    async with mcp_session(idemd, idemd.operations_token) as session:
        error, document = await call(session, "lookup", {"operation_id": operation_id})
    assert not error, document
    assert document["result_body_omitted"]["bytes"] == len(body)
    assert "body" not in document["operation"]["result"]
    assert document["result_body_text"] is None
    assert "x" * 100 not in json.dumps(document)


async def test_a_refusal_is_a_tool_error_with_the_servers_code(idemd: Idemd) -> None:
    async with mcp_session(idemd, idemd.operations_token) as session:
        error, document = await call(session, "lookup", {"operation_id": str(uuid.uuid4())})
        assert error
        assert document["refused_by"] == "server"
        assert document["rpc"] == "Lookup"
        assert document["code"] == "NOT_FOUND"
        # Arguments that name no request are refused before anything is sent.
        error, document = await call(
            session, "lookup", {"operation_id": str(uuid.uuid4()), "operation": "payments.charge", "key": "k"}
        )
        assert error
        assert document["refused_by"] == "idemd mcp"
        assert document["reason"] == "INVALID_TOOL_ARGUMENTS"
        # A misspelt argument is refused, not ignored.
        result = await session.call_tool("lookup", {"operation_id": "x", "with_history": True})
        assert result.is_error


async def test_list_unresolved_finds_an_operation_whose_outcome_is_unknown(idemd: Idemd) -> None:
    operation_id, fence = idemd.unknown(key())
    async with mcp_session(idemd, idemd.reconcile_token) as session:
        listed: dict[str, dict[str, Any]] = {}
        page_token = ""
        while True:
            error, page = await call(session, "list_unresolved", {"page_size": 2, "page_token": page_token})
            assert not error, page
            listed.update({operation["operationId"]: operation for operation in page.get("operations", [])})
            page_token = page.get("nextPageToken", "")
            if not page_token:
                break
    assert listed[operation_id]["state"] == "OPERATION_STATE_UNKNOWN"
    assert listed[operation_id]["fence"] == fence


async def test_reconcile_changes_nothing_until_confirmed_then_resolves(idemd: Idemd) -> None:
    scope_key = key()
    operation_id, fence = idemd.unknown(scope_key)
    arguments = {
        "operation_id": operation_id,
        "expected_fence": fence,
        "resolution": "SUCCEEDED",
        "result_text": '{"charge":"ch_found_at_provider"}',
    }
    async with mcp_session(idemd, idemd.reconcile_token) as session:
        for unconfirmed in (arguments, {**arguments, "confirm": False}):
            error, document = await call(session, "reconcile", unconfirmed)
            assert error
            assert document["reason"] == "CONFIRMATION_REQUIRED"
            assert document["sent"] is False
            before = idemd.lookup(operation_id)
            assert before["state"] == "OPERATION_STATE_UNKNOWN"
            assert before["fence"] == fence

        error, document = await call(session, "reconcile", {**arguments, "confirm": True})
        assert not error, document
        assert document["state"] == "OPERATION_STATE_SUCCEEDED"
        assert int(document["fence"]) > int(fence)

        reconciled = document

        # Re-sent as it was (its answer lost, say): answered the same, nothing written twice.
        error, document = await call(session, "reconcile", {**arguments, "confirm": True})
        assert not error, document
        assert document == reconciled

        # Another resolution at the fence it was read at: the server refuses it.
        failed = {**arguments, "resolution": "FAILED", "error_code": "declined", "error_message": "declined"}
        error, document = await call(session, "reconcile", {**failed, "confirm": True})
        assert error
        assert document["refused_by"] == "server"
        assert document["rpc"] == "Reconcile"
        assert (document["code"], document["reason"]) == ("FAILED_PRECONDITION", "REQUEST_MISMATCH"), document

    after = idemd.lookup(operation_id)
    assert after["state"] == "OPERATION_STATE_SUCCEEDED"
    assert base64.b64decode(after["result"]["body"]) == b'{"charge":"ch_found_at_provider"}'
    # The caller's retry replays what the reconciliation stored: nothing runs again.
    replay = idemd.claim(scope_key, {"amount": 2500, "order": scope_key})
    assert base64.b64decode(replay["completed"]["result"]["body"]) == b'{"charge":"ch_found_at_provider"}'


async def test_an_operations_credential_cannot_list_or_reconcile(idemd: Idemd) -> None:
    operation_id, fence = idemd.unknown(key())
    async with mcp_session(idemd, idemd.operations_token) as session:
        reconcile = {
            "operation_id": operation_id,
            "expected_fence": fence,
            "resolution": "SUCCEEDED",
            "result_text": "{}",
            "confirm": True,
        }
        # Not offered, so not callable: the MCP server answers that no such tool exists.
        for tool, arguments in (("reconcile", reconcile), ("list_unresolved", {})):
            with pytest.raises(MCPError, match="tool not found"):
                await session.call_tool(tool, arguments)
    assert idemd.lookup(operation_id)["state"] == "OPERATION_STATE_UNKNOWN"
    # And the server refuses that token itself, whatever a client offers.
    with pytest.raises(urllib.error.HTTPError) as refused:
        idemd.call("ListUnresolved", {}, idemd.operations_token)
    assert refused.value.code == 403


async def test_diagnose_reaches_the_server_and_hands_back_its_answer(idemd: Idemd) -> None:
    operation_id, _ = idemd.succeeded(key(), b"{}")
    async with mcp_session(idemd, idemd.operations_token) as session:
        error, document = await call(session, "diagnose", {"operation_id": operation_id})
    assert not error, document
    assert document["verdict"] == "VERDICT_DIAGNOSED"
    assert document["handoff"]["operationId"] == operation_id


async def test_a_plan_beyond_the_credential_stops_the_agent_and_a_reconciler_gets_it(idemd: Idemd) -> None:
    operation_id, _ = idemd.unknown(key())
    found = {
        "operation_id": operation_id,
        "evidence": {
            "symptom": "SYMPTOM_STUCK_IN_PROGRESS",
            "provider_finding": "PROVIDER_FINDING_EFFECT_FOUND",
            "provider_looked_ago_seconds": 1,
        },
    }
    async with mcp_session(idemd, idemd.operations_token) as session:
        error, document = await call(session, "diagnose", found)
    assert error, document
    assert document["code"] == "PERMISSION_DENIED"
    assert document["reason"] == "PLAN_EXCEEDS_SCOPE"
    assert document["metadata"]["scope"] == "reconcile"
    async with mcp_session(idemd, idemd.reconcile_token) as session:
        error, document = await call(session, "diagnose", found)
    assert not error, document
    assert document["plan"][0]["kind"] == "MOVE_KIND_RECONCILE"


async def test_a_premature_negative_lookup_escalates_and_plans_no_action(idemd: Idemd) -> None:
    operation_id, _ = idemd.unknown(key())
    async with mcp_session(idemd, idemd.reconcile_token) as session:
        error, document = await call(
            session,
            "diagnose",
            {
                "operation_id": operation_id,
                "evidence": {
                    "provider_finding": "PROVIDER_FINDING_NO_EFFECT",
                    "provider_looked_ago_seconds": 0,
                },
            },
        )
    assert not error, document
    assert document["verdict"] == "VERDICT_ESCALATE"
    assert any("sent after" in missing for missing in document["missing"])
    kinds = [step["kind"] for step in document["plan"]]
    assert "MOVE_KIND_RECONCILE" not in kinds and kinds[-1] == "MOVE_KIND_HAND_OVER"


async def test_diagnose_timeout_on_a_succeeded_operation_is_an_ambiguous_outcome(idemd: Idemd) -> None:
    scope_key = key()
    idemd.succeeded(scope_key, b'{"charge":"ch_1"}')
    async with mcp_session(idemd, idemd.operations_token) as session:
        error, document = await call(
            session,
            "diagnose",
            {
                "operation": "payments.charge",
                "key": scope_key,
                "evidence": {
                    "symptom": "SYMPTOM_TIMEOUT_BEFORE_RESPONSE",
                    "json_payload": json.dumps({"amount": 1000, "order": scope_key}),
                    "observed_ago_seconds": 5,
                },
                "constraints": {"authority": "AUTHORITY_RETRY"},
                "success_criterion": "the customer is charged exactly once",
            },
        )
    assert not error, document
    assert document["diagnosis"]["cause"] == "CAUSE_AMBIGUOUS_OUTCOME"
    assert document["plan"][0]["kind"] in {"MOVE_KIND_LOOK", "MOVE_KIND_CLAIM_SAME_KEY"}
    assert document["handoff"]["successCriterion"] == "the customer is charged exactly once"


async def test_diagnose_refuses_evidence_carrying_a_private_key_and_logs_none_of_it(idemd: Idemd) -> None:
    operation_id, _ = idemd.succeeded(key(), b"{}")
    errlog = idemd.tmp / f"mcp-trace-{uuid.uuid4().hex[:8]}.log"
    notes = f"the provider's signing key, marker {uuid.uuid4().hex}:\n{PRIVATE_KEY}"
    # Everything the MCP server and its SDK would log, whatever RUST_LOG asks for.
    async with mcp_session(idemd, idemd.operations_token, errlog=errlog, rust_log="trace") as session:
        error, document = await call(session, "diagnose", {"operation_id": operation_id, "evidence": {"notes": notes}})
    logged = errlog.read_text()
    assert "BEGIN PRIVATE KEY" not in logged
    assert notes.split(":")[0] not in logged
    assert error
    assert document["refused_by"] == "server"
    assert document["code"] == "INVALID_ARGUMENT"
    assert document["reason"] == "EVIDENCE_CARRIES_SECRET"
    assert "BEGIN PRIVATE KEY" not in json.dumps(document)


def test_a_credential_the_server_refuses_ends_start_up_and_stdout_stays_empty(idemd: Idemd) -> None:
    done = subprocess.run(
        [idemd.binary, "mcp"],
        env={"PATH": os.environ.get("PATH", ""), "IDEMD_ADDR": idemd.addr, "IDEMD_TOKEN": "not-a-token"},
        input=b"",
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert done.returncode != 0
    assert done.stdout == b""
    assert b"UNAUTHENTICATED" in done.stderr.upper() or b"Unauthenticated" in done.stderr
