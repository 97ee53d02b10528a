"""Item: stubs generated at build time from ../../proto, typed package."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import idemd
from idemd.proto import error_details_pb2, pack_detail, pb, rpc_type_name, status_pb2

PACKAGE = Path(idemd.__file__).parent
SOURCE = Path(__file__).resolve().parents[1]


def test_generated_modules_come_from_the_repository_protos() -> None:
    assert pb.DESCRIPTOR.name == "idem/v1/idempotency.proto"
    assert set(pb.DESCRIPTOR.services_by_name["IdempotencyService"].methods_by_name) == {
        "Claim", "Renew", "Complete", "Fail", "Lookup", "Reconcile", "ListUnresolved",
        "ListOperations", "Forget", "GetPolicy", "Hold", "Release", "ListHolds", "Diagnose",
    }
    # The vendored google.rpc protos, under a private name and package.
    assert status_pb2.DESCRIPTOR.name == "idemd_rpc/status.proto"
    assert error_details_pb2.ErrorInfo.DESCRIPTOR.full_name == "idemd.vendored.rpc.ErrorInfo"
    assert rpc_type_name(error_details_pb2.ErrorInfo()) == "google.rpc.ErrorInfo"
    assert pack_detail(error_details_pb2.RetryInfo()).type_url == "type.googleapis.com/google.rpc.RetryInfo"
    # The field the server is about to fill is there (proto is the contract).
    assert "previous_attempt_deadline" in pb.ReconcileFirst.DESCRIPTOR.fields_by_name


def test_installed_package_is_typed_with_generated_stubs() -> None:
    assert (PACKAGE / "py.typed").is_file()
    for stub in ("_proto/idem/v1/idempotency_pb2.pyi", "_proto/idemd_rpc/status_pb2.pyi"):
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


@pytest.mark.parametrize("first", ["idemd", "google.rpc"])
def test_coexists_with_googleapis_common_protos(first: str) -> None:
    """grpcio-status and Google's libraries register google/rpc/*.proto process-wide;
    idemd's vendored copies must not clash with them, whichever is imported first."""
    if not _has_module("google.rpc"):
        pytest.skip("googleapis-common-protos is not installed")
    imports = ["import idemd", "from google.rpc import status_pb2, error_details_pb2"]
    if first != "idemd":
        imports.reverse()
    check = (
        "; ".join(imports)
        + "; from idemd import errors"
        + "; s = status_pb2.Status(code=9)"
        + "; s.details.add().Pack(error_details_pb2.ErrorInfo(reason='LEASE_LOST', domain='idem.v1',"
        + " metadata={'current_fence': '7'}))"
        + "; e = errors.from_status(__import__('grpc').StatusCode.ABORTED, '', s.SerializeToString())"
        + "; assert type(e).__name__ == 'LeaseLostError' and e.current_fence == 7, e"
    )
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
