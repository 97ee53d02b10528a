"""Render the idemd chart with a real helm binary and hand the manifests to tests.

The helm binary comes from the HELM environment variable (.ci/chart-check sets it),
falling back to `helm` on PATH. Nothing talks to a cluster: `helm template` and
`helm install --dry-run=client` only.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "helm" / "idemd"
ALL_FEATURES = CHART / "ci" / "all-features-values.yaml"
KUBE_VERSION = os.environ.get("KUBE_VERSION", "1.30.0")
RELEASE = "rel"
NAMESPACE = "idemd-test"


def helm_binary() -> str:
    helm = os.environ.get("HELM") or shutil.which("helm")
    if not helm:
        pytest.fail("no helm binary: set HELM=/path/to/helm (.ci/chart-check does)")
    return helm


def _set_args(values: dict | None) -> list[str]:
    args: list[str] = []
    for key, value in (values or {}).items():
        args += ["--set-json", f"{key}={json.dumps(value)}"]
    return args


@dataclass(frozen=True)
class Render:
    """The documents of one `helm template` run."""

    docs: tuple[dict, ...]
    text: str

    def all(self, kind: str) -> list[dict]:
        return [doc for doc in self.docs if doc["kind"] == kind]

    def one(self, kind: str, name: str | None = None) -> dict:
        found = [doc for doc in self.all(kind) if name is None or doc["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
        return found[0]

    def maybe(self, kind: str, name: str) -> dict | None:
        found = [doc for doc in self.all(kind) if doc["metadata"]["name"] == name]
        return found[0] if found else None


@functools.lru_cache(maxsize=None)
def _template(values_json: str, all_features: bool) -> subprocess.CompletedProcess:
    command = [helm_binary(), "template", RELEASE, str(CHART), "--namespace", NAMESPACE,
               "--kube-version", KUBE_VERSION]
    if all_features:
        command += ["-f", str(ALL_FEATURES)]
    command += _set_args(json.loads(values_json))
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def render(values: dict | None = None, *, all_features: bool = False) -> Render:
    """Render the chart; `values` maps dotted keys to JSON-able values (--set-json)."""
    result = _template(json.dumps(values or {}, sort_keys=True), all_features)
    if result.returncode != 0:
        pytest.fail(f"helm template failed:\n{result.stderr}")
    docs = tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)
    return Render(docs=docs, text=result.stdout)


def render_error(values: dict | None = None, *, all_features: bool = False) -> str:
    """Render the chart expecting helm to refuse; returns its error output."""
    result = _template(json.dumps(values or {}, sort_keys=True), all_features)
    assert result.returncode != 0, f"helm template accepted {values!r}, expected a refusal"
    return result.stderr


def notes(values: dict | None = None, *, all_features: bool = False) -> str:
    """The rendered NOTES.txt, from an offline client-side dry-run install."""
    command = [helm_binary(), "install", RELEASE, str(CHART), "--namespace", NAMESPACE,
               "--dry-run=client"]
    if all_features:
        command += ["-f", str(ALL_FEATURES)]
    command += _set_args(values)
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False,
                            env={**os.environ, "KUBECONFIG": os.devnull})
    assert result.returncode == 0, result.stderr
    assert "NOTES:" in result.stdout, result.stdout
    return result.stdout.split("NOTES:", 1)[1]


# Values that switch the chart to PostgreSQL, the production mode.
POSTGRES = {"database.existingSecret": "idemd-db", "database.secretKey": "url"}


@pytest.fixture(scope="session")
def default_render() -> Render:
    return render()


@pytest.fixture(scope="session")
def postgres_render() -> Render:
    return render(POSTGRES)


@pytest.fixture(scope="session")
def full_render() -> Render:
    return render(all_features=True)


@pytest.fixture(scope="session")
def chart_values() -> dict:
    return yaml.safe_load((CHART / "values.yaml").read_text())


@pytest.fixture(scope="session")
def all_features_values() -> dict:
    return yaml.safe_load(ALL_FEATURES.read_text())


def fullname() -> str:
    return f"{RELEASE}-idemd"


def pod_spec(workload: dict) -> dict:
    return workload["spec"]["template"]["spec"]


def container(workload: dict, name: str) -> dict:
    found = [c for c in pod_spec(workload)["containers"] if c["name"] == name]
    assert len(found) == 1, f"no container {name}"
    return found[0]


def env_map(ctr: dict) -> dict[str, dict]:
    return {entry["name"]: entry for entry in ctr.get("env", [])}


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def duration_seconds(text: str) -> float:
    """Seconds of a duration such as 25s, 1m30s, 500ms, 2h."""
    import re

    parts = re.findall(r"(\d+)(ms|s|m|h)", text)
    assert parts and "".join(n + u for n, u in parts) == text, f"bad duration {text!r}"
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(int(number) * scale[unit] for number, unit in parts)
