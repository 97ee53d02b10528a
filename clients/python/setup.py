"""Build hook: compiles the idemd API and google.rpc protos into the package.

The protos are the repository's own (../../proto, with google/rpc vendored
there); an sdist carries a copy in ./proto. Nothing generated is committed.
IDEMD_PROTO_DIR overrides where they are read from.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from importlib import resources
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
PROTOS = (
    "idem/v1/idempotency.proto",
    "google/rpc/status.proto",
    "google/rpc/error_details.proto",
)
# The google.rpc protos are compiled under a private file name and package: the
# googleapis-common-protos package (which grpcio-status and Google's libraries bring)
# registers google/rpc/status.proto and google.rpc.Status in protobuf's process-wide
# pool, and a second, different registration of either fails the later import. The
# wire format does not depend on the package; the decoder matches type URLs by name.
PRIVATE_RPC_DIR = "idemd_rpc"
PRIVATE_RPC_PACKAGE = "idemd.vendored.rpc"  # no "google" in it: scopes resolve outward
# Where the generated modules go, inside the package: idemd._proto.idem.v1, ….
PACKAGE_DIRS = ("", "idem", "idem/v1", PRIVATE_RPC_DIR)


def proto_root() -> Path:
    candidates = [HERE / "../../proto", HERE / "proto"]
    if os.environ.get("IDEMD_PROTO_DIR"):
        candidates.insert(0, Path(os.environ["IDEMD_PROTO_DIR"]))
    for candidate in candidates:
        if (candidate / PROTOS[0]).is_file():
            return candidate.resolve()
    raise SystemExit(
        "idemd: cannot find the protos (looked for "
        + ", ".join(str(c / PROTOS[0]) for c in candidates)
        + "); build from the repository or set IDEMD_PROTO_DIR"
    )


def compile_protos(out: Path) -> None:
    from grpc_tools import protoc

    # Start clean: an in-tree build/ keeps what earlier builds generated.
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    root = proto_root()
    well_known = resources.files("grpc_tools") / "_proto"
    with tempfile.TemporaryDirectory() as scratch:
        private = Path(scratch)
        sources = [str(root / PROTOS[0])]
        for proto in PROTOS[1:]:
            text = (root / proto).read_text()
            renamed = text.replace("package google.rpc;", f"package {PRIVATE_RPC_PACKAGE};")
            if renamed == text:
                raise SystemExit(f"idemd: {proto} does not declare package google.rpc")
            target = private / PRIVATE_RPC_DIR / Path(proto).name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(renamed)
            sources.append(str(target))
        args = [
            "grpc_tools.protoc",
            f"-I{root}",
            f"-I{private}",
            f"-I{well_known}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            *sources,
        ]
        if protoc.main(args) != 0:
            raise SystemExit(f"idemd: protoc failed on {root}")
    for directory in PACKAGE_DIRS:
        init = out / directory / "__init__.py"
        if not init.exists():
            init.write_text('"""Generated from the idemd protos at build time."""\n')


def gencode_requirement() -> str:
    """protobuf's runtime must be at least the version of the generated code."""
    with tempfile.TemporaryDirectory() as scratch:
        compile_protos(Path(scratch))
        generated = (Path(scratch) / PRIVATE_RPC_DIR / "status_pb2.py").read_text()
    found = re.search(r"Protobuf Python Version: (\d+)\.(\d+)\.(\d+)", generated)
    if found is None:
        return "protobuf>=5.26"
    major, minor, patch = found.groups()
    return f"protobuf>={major}.{minor}.{patch},<{int(major) + 1}"


class BuildPyWithProtos(build_py):
    def run(self) -> None:
        super().run()
        compile_protos(Path(self.build_lib) / "idemd" / "_proto")


class SdistWithProtos(sdist):
    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        root = proto_root()
        for proto in PROTOS:
            target = Path(base_dir) / "proto" / proto
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / proto, target)


setup(
    install_requires=["grpcio>=1.62", gencode_requirement()],
    cmdclass={"build_py": BuildPyWithProtos, "sdist": SdistWithProtos},
)
