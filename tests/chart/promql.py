"""The series selectors of PromQL expressions, as Prometheus' own grammar reads them.

promql_selectors.cjs parses with @prometheus-io/lezer-promql (the parser of Prometheus'
web UI) under node; .ci/chart-check installs it, pinned, and names its folder in
LEZER_PROMQL. A syntax error is a test failure. Grafana's range variables
(`[$__rate_interval]`) are not PromQL: they are read as `[5m]`; variables inside strings
(`namespace=~"$namespace"`) are plain strings to the parser.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("promql_selectors.cjs")
AGGREGATORS = {
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
    "bottomk", "topk", "quantile", "limitk", "limit_ratio",
}
GRAFANA_RANGE = re.compile(r"\[\$\{?__[a-z_]+\}?\]")


@dataclass(frozen=True)
class Call:
    """A function or aggregation around a selector; `labels` is its by/without list."""

    name: str
    grouping: str | None = None
    labels: tuple[str, ...] = ()

    @property
    def is_aggregation(self) -> bool:
        return self.name in AGGREGATORS


@dataclass
class Selector:
    metric: str
    matchers: list[tuple[str, str, str]] = field(default_factory=list)
    has_range: bool = False
    # Calls around the selector, innermost first.
    calls: list[Call] = field(default_factory=list)

    def matcher(self, label: str) -> tuple[str, str] | None:
        for name, op, value in self.matchers:
            if name == label:
                return op, value
        return None

    def first_aggregation(self) -> Call | None:
        return next((call for call in self.calls if call.is_aggregation), None)


def _parser_dir() -> str:
    folder = os.environ.get("LEZER_PROMQL")
    if not folder or not (Path(folder) / "node_modules").is_dir():
        pytest.fail("set LEZER_PROMQL to a folder with node_modules/@prometheus-io/lezer-promql "
                    "(.ci/chart-check installs it)")
    return folder


_PARSED: dict[str, dict] = {}


def _source(expr: str) -> str:
    return GRAFANA_RANGE.sub("[5m]", expr)


def parse_many(exprs: list[str]) -> None:
    """Parses the expressions not parsed yet, all in one node run."""
    missing = sorted({_source(expr) for expr in exprs} - set(_PARSED))
    if not missing:
        return
    node = shutil.which("node")
    if not node:
        pytest.fail("node is required to parse PromQL")
    result = subprocess.run([node, str(SCRIPT), _parser_dir()], input=json.dumps(missing),
                            capture_output=True, text=True, timeout=60, check=False)
    if result.returncode != 0:
        pytest.fail(f"promql_selectors.cjs failed:\n{result.stderr}")
    _PARSED.update(zip(missing, json.loads(result.stdout)))


def selectors(expr: str) -> list[Selector]:
    """Every series selector in `expr`; fails the test on a syntax error."""
    parse_many([expr])
    parsed = _PARSED[_source(expr)]
    if "error" in parsed:
        pytest.fail(f"PromQL syntax error in {expr!r}: {parsed['error']}")
    return [Selector(metric=found["metric"], matchers=[tuple(m) for m in found["matchers"]],
                     has_range=found["has_range"],
                     calls=[Call(call["name"], call["grouping"], tuple(call["labels"]))
                            for call in found["calls"]])
            for found in parsed["selectors"]]
