"""Item: stubs generated at build time from ../../proto, typed package."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import idemd
from idemd.proto import error_details_pb2, pb, status_pb2

PACKAGE = Path(idemd.__file__).parent
SOURCE = Path(__file__).resolve().parents[1]


def test_generated_modules_come_from_the_repository_protos() -> None:
    assert pb.DESCRIPTOR.name == "idem/v1/idempotency.proto"
    assert set(pb.DESCRIPTOR.services_by_name["IdempotencyService"].methods_by_name) == {
        "Claim", "Renew", "Complete", "Fail", "Lookup", "Reconcile", "ListUnresolved"
    }
    assert status_pb2.DESCRIPTOR.name == "google/rpc/status.proto"
    assert error_details_pb2.ErrorInfo.DESCRIPTOR.full_name == "google.rpc.ErrorInfo"
    # The field the server is about to fill is there (proto is the contract).
    assert "previous_attempt_deadline" in pb.ReconcileFirst.DESCRIPTOR.fields_by_name


def test_installed_package_is_typed_with_generated_stubs() -> None:
    assert (PACKAGE / "py.typed").is_file()
    for stub in ("_proto/idem/v1/idempotency_pb2.pyi", "_proto/google/rpc/status_pb2.pyi"):
        assert (PACKAGE / stub).is_file(), stub


def test_no_generated_code_is_committed() -> None:
    if not (SOURCE / "src/idemd").is_dir():
        pytest.skip("not run from the repository")
    generated = list((SOURCE / "src").rglob("*_pb2*"))
    assert generated == []


def test_package_is_mypy_strict_clean(tmp_path: Path) -> None:
    if shutil.which("mypy") is None and not _has_module("mypy"):
        pytest.skip("mypy is not installed")
    # From a neutral directory, so the installed package (with its generated stubs)
    # is what is checked.
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(SOURCE / "pyproject.toml"),
         "--cache-dir", str(tmp_path / "cache"), "-p", "idemd"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None
