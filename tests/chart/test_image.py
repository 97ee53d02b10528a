"""The Dockerfile keeps the contract the chart relies on (it cannot be built here:
no container engine, so its shape is asserted instead)."""

from __future__ import annotations

import json
import re

from conftest import REPO_ROOT

DOCKERFILE = (REPO_ROOT / "Dockerfile").read_text()
INSTRUCTIONS = [
    line.strip()
    for line in re.sub(r"\\\n", " ", DOCKERFILE).splitlines()
    if line.strip() and not line.lstrip().startswith("#")
]


def instructions(keyword: str) -> list[str]:
    return [line[len(keyword) + 1:].strip() for line in INSTRUCTIONS
            if line.upper().startswith(keyword + " ")]


def final_stage() -> list[str]:
    starts = [i for i, line in enumerate(INSTRUCTIONS) if line.upper().startswith("FROM ")]
    return INSTRUCTIONS[starts[-1]:]


def test_builds_with_the_official_rust_image_and_the_lockfile():
    assert "ARG RUST_IMAGE=rust:1.95-bookworm" in INSTRUCTIONS
    assert instructions("FROM")[0].startswith("${RUST_IMAGE} AS build")
    assert any("cargo build --release --locked" in run for run in instructions("RUN"))


def test_runs_the_binary_alone_on_distroless_as_non_root():
    assert "ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot" in INSTRUCTIONS
    stage = final_stage()
    assert stage[0] == "FROM ${RUNTIME_IMAGE}"
    copies = [line for line in stage if line.upper().startswith("COPY ")]
    assert any(line.endswith(" /idemd") for line in copies)
    assert not any(re.match(r"COPY (\S+ )*\. ", line) for line in copies), "copies the source tree"
    assert "USER 65532:65532" in stage
    assert not any(line.upper().startswith("RUN ") for line in stage), "runtime stage has no shell"


def test_entrypoint_command_and_ports():
    assert json.loads(instructions("ENTRYPOINT")[-1]) == ["/idemd"]
    assert json.loads(instructions("CMD")[-1]) == ["serve"]
    assert instructions("EXPOSE")[-1].split() == ["50051", "9464"]


def test_dockerignore_keeps_build_output_and_secrets_out():
    ignored = {line.strip() for line in (REPO_ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert {"target/", ".git/", "idemd-data/", ".env", "*.pem", "*.key"} <= ignored
