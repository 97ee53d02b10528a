"""Every value is commented in values.yaml, documented in the chart README and known
to values.schema.json; the README's defaults match values.yaml."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from conftest import CHART

# Objects passed through to Kubernetes as a whole; documented as one row.
OPAQUE = {"podSecurityContext", "securityContext", "resources", "migrations.job.resources",
          "metrics.grafanaDashboard.labels"}


def leaves(value, prefix: str = ""):
    if isinstance(value, dict) and value and prefix not in OPAQUE:
        for key, child in value.items():
            yield from leaves(child, f"{prefix}.{key}" if prefix else key)
    else:
        yield prefix, value


def commented_keys() -> set[str]:
    """Key paths of values.yaml preceded by a `# -- description` comment."""
    keys, stack, pending = set(), [], False
    for line in (CHART / "values.yaml").read_text().splitlines():
        if re.match(r"^\s*# -- ", line):
            pending = True
            continue
        if re.match(r"^\s*#", line):
            continue
        match = re.match(r"^(\s*)([A-Za-z0-9_]+):", line)
        if match:
            depth = len(match.group(1)) // 2
            stack = stack[:depth] + [match.group(2)]
            if pending:
                keys.add(".".join(stack))
        pending = False
    return keys


def readme_rows() -> dict[str, list[str]]:
    rows = {}
    for line in (CHART / "README.md").read_text().splitlines():
        match = re.match(r"^\| `([A-Za-z0-9_.]+)` \|(.*)\|$", line)
        if match:
            rows[match.group(1)] = [cell.strip() for cell in match.group(2).split("|")]
    return rows


VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
LEAVES = dict(leaves(VALUES))


@pytest.mark.parametrize("key", sorted(LEAVES))
def test_value_is_commented_and_documented(key):
    assert key in commented_keys(), f"{key}: add a '# -- ' comment above it in values.yaml"
    rows = readme_rows()
    assert key in rows, f"{key}: add a row to the values table in helm/idemd/README.md"
    value = LEAVES[key]
    default_cell = rows[key][1]
    if not isinstance(value, (dict, list)) or len(json.dumps(value)) < 40:
        assert default_cell == f"`{json.dumps(value)}`", f"{key}: README default is stale"


def test_readme_documents_no_removed_value():
    stale = sorted(set(readme_rows()) - set(LEAVES))
    assert not stale, f"README documents values that do not exist: {stale}"


def test_schema_knows_every_value():
    schema = json.loads((CHART / "values.schema.json").read_text())

    def lookup(node: dict, path: list[str]) -> bool:
        if not path:
            return True
        if "$ref" in node:
            node = schema["definitions"][node["$ref"].rsplit("/", 1)[1]]
        for sub in node.get("allOf", []):
            if lookup(sub, path):
                return True
        child = node.get("properties", {}).get(path[0])
        return child is not None and lookup(child, path[1:])

    missing = [key for key in LEAVES if not lookup(schema, key.split("."))]
    assert not missing, f"values.schema.json lacks {missing}"
    assert schema["additionalProperties"] is False
