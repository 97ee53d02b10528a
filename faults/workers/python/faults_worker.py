"""The fault campaign's worker for the Python client (faults/workers/README.md).

Reads deliveries as JSON lines on stdin, runs ``idemd.execute.execute_once`` for each
(asyncio, all at once) against the duplicating stages named in IDEMD_FAULTS_TARGETS,
with the effect and the lookup at the campaign's HTTP provider (IDEMD_FAULTS_PROVIDER),
and writes each delivery's outcome as a JSON line on stdout.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from urllib.parse import quote, urlsplit

from idemd import Client, RetryPolicy
from idemd.errors import (
    ConflictError,
    LeaseLostError,
    NeedsReconciliationError,
    OperationFailedError,
    OutcomeUnknownError,
    PendingError,
    SupersededError,
)
from idemd.execute import EffectContext, Success, Terminal, execute_once

PROVIDER = urlsplit(os.environ["IDEMD_FAULTS_PROVIDER"])
# The campaign's own check (.ci/run): a worker whose lookup never finds the effect
# (IDEMD_FAULTS_BROKEN_LOOKUP=1) runs a stalled effect again on takeover, and the run
# must fail on the duplicate effect.
BROKEN_LOOKUP = os.environ.get("IDEMD_FAULTS_BROKEN_LOOKUP") == "1"
RETRY = RetryPolicy(
    max_sends=200, initial_backoff=0.02, max_backoff=0.3, total_timeout=20.0, call_timeout=2.0
)


async def provider(path: str) -> tuple[int, bytes]:
    """One GET to the campaign's provider (HTTP/1.1, Connection: close)."""
    reader, writer = await asyncio.open_connection(PROVIDER.hostname, PROVIDER.port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: provider\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        response = await reader.read()
    finally:
        writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


async def note_attempt(ctx: EffectContext) -> None:
    takeover = 1 if ctx.previous_outcome_unknown else 0
    await provider(f"/attempt?reference={quote(ctx.operation_id)}&fence={ctx.fence}&takeover={takeover}")


async def perform(ctx: EffectContext, honour_key: bool) -> bytes:
    _, body = await provider(f"/perform?reference={quote(ctx.operation_id)}&honour_key={int(honour_key)}")
    return body


async def deliver(clients: list[Client], request: dict) -> dict:
    client = clients[request["client"] % len(clients)]
    ran = {"effect": False, "found": False}
    honour_key = request["honour_key"]
    stall = request.get("stall")

    async def effect(ctx: EffectContext):
        await note_attempt(ctx)
        ran["effect"] = True
        if request.get("conflict"):
            await provider(f"/forbidden?key={quote(request['key'])}")
            return Terminal(code="CONFLICT_EXECUTED")
        if stall is not None:
            if stall["performed_first"]:
                await perform(ctx, False)
            await asyncio.sleep(stall["ms"] / 1000)
            return Success(await perform(ctx, False), "application/json")
        await asyncio.sleep(request["work_ms"] / 1000)
        return Success(await perform(ctx, honour_key), "application/json")

    async def lookup(ctx: EffectContext):
        await note_attempt(ctx)
        status, body = await provider(f"/lookup?reference={quote(ctx.operation_id)}")
        if status == 200 and not BROKEN_LOOKUP:
            ran["found"] = True
            return Success(body, "application/json")
        return None

    plain = request.get("conflict") or honour_key
    try:
        result = await execute_once(
            client,
            "faults.transfer",
            request["key"],
            request["payload"],
            effect,
            lease=request["lease_ms"] / 1000,
            attempt_duration=request["attempt_ms"] / 1000,
            deadline=request["deadline_ms"] / 1000,
            max_attempts=request["max_attempts"],
            lookup=None if plain else lookup,
            provider_deduplicates=bool(honour_key and not request.get("conflict")),
        )
    except ConflictError as error:
        return {"outcome": "error", "error": "conflict", "operation_id": getattr(error, "operation_id", None)}
    except OperationFailedError as error:
        return {"outcome": "failed", "operation_id": error.operation_id, "code": error.code}
    except (LeaseLostError, SupersededError):
        return {"outcome": "error", "error": "lease_lost"}
    except OutcomeUnknownError as error:
        return {"outcome": "error", "error": "outcome_unknown", "operation_id": error.operation_id}
    except NeedsReconciliationError as error:
        return {"outcome": "error", "error": "needs_reconciliation", "operation_id": error.operation_id}
    except PendingError as error:
        return {"outcome": "error", "error": "deadline_passed", "operation_id": error.operation_id}
    except Exception as error:  # transport, unavailable, anything else: delivered again
        print(f"delivery {request['id']}: {type(error).__name__}: {error}", file=sys.stderr)
        return {"outcome": "error", "error": "other"}
    if result.replayed:
        source = "replayed"
    elif ran["found"] and not ran["effect"]:
        source = "reconciled"
    else:
        source = "executed"
    return {
        "outcome": "succeeded",
        "operation_id": result.operation_id,
        "body": result.body.decode(),
        "source": source,
    }


async def main() -> None:
    token = os.environ["IDEMD_FAULTS_TOKEN"]
    targets = os.environ["IDEMD_FAULTS_TARGETS"].split(",")
    # Two connections to each replica's stage, in the campaign's order (a local
    # subchannel pool: channels to one target would share a connection otherwise).
    options = [("grpc.use_local_subchannel_pool", 1)]
    clients = [
        Client(target, token, retry=RETRY, options=options) for target in targets for _ in range(2)
    ]
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print(json.dumps({"ready": True}), flush=True)
    running: set[asyncio.Task] = set()

    async def one(request: dict) -> None:
        reply = await deliver(clients, request)
        reply["id"] = request["id"]
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()

    while line := await reader.readline():
        task = asyncio.create_task(one(json.loads(line)))
        running.add(task)
        task.add_done_callback(running.discard)
    if running:
        await asyncio.wait(running)


if __name__ == "__main__":
    asyncio.run(main())
