"""Item: examples/orders.py runs against a real server and prints one order, one result."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import Server

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "orders.py"


def test_orders_example(server: Server) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--addr", server.addr, "--key", "order-example-1"],
        env={**os.environ, "IDEMD_TOKEN": server.token},  # type: ignore[attr-defined]
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].startswith("attempt 1: timed out after the provider created an order"), lines
    assert lines[2].startswith("10 concurrent retries: 1 distinct result(s): "), lines
    assert '"order_id": "ord_1"' in lines[2]
    assert lines[3].strip() == "1 recorded the order found by its client reference, 9 replayed it"
    assert lines[4] == "orders at the provider: 1"
    assert lines[5].startswith("a later retry: replayed ") and '"ord_1"' in lines[5]
    assert lines[6].startswith("a retry with amount 2600: refused, IDEMPOTENCY_KEY_REUSED")
    assert lines[7] == "orders at the provider: 1"
