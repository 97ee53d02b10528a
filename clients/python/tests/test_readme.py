"""Item: the README's usage snippet runs as printed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Server

README = Path(__file__).resolve().parents[1] / "README.md"



@pytest.mark.parametrize("flavour", ["asyncio", "blocking"])
def test_readme_usage_snippet(flavour: str, server: Server, tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    marker = "async with" if flavour == "asyncio" else "with idemd.SyncClient"
    snippet = next(block for block in blocks if "execute_once" in block and marker in block)
    script = tmp_path / "usage.py"
    script.write_text(snippet)
    env = {**os.environ, "IDEMD_ADDR": server.addr, "IDEMD_TOKEN": server.token}  # type: ignore[attr-defined]
    runs = [subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                           text=True, timeout=60, check=False) for _ in range(2)]
    assert [run.returncode for run in runs] == [0, 0], runs[0].stderr + runs[1].stderr
    assert runs[0].stdout.strip() == '{"charge":"ch_1"} (charged)'
    assert runs[1].stdout.strip() == '{"charge":"ch_1"} (replayed)'
