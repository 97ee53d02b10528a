"""Real brokers for the consumer tests, started by the tests themselves on private
ports, one of each per test session (RabbitMQ takes seconds to boot): Debian's
``rabbitmq-server`` (its own node name, ports, epmd and directories) and
``nats-server -js``. Stopped, with their directories removed, when the session ends.

A missing broker binary fails the tests when CI or IDEMD_REQUIRE_BROKERS is set (.ci/run
installs them and sets the latter); elsewhere they are skipped with a loud message.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _find(*candidates: str) -> str | None:
    for candidate in candidates:
        if os.path.exists(candidate):
            return candidate
    return shutil.which(os.path.basename(candidates[0]))


def _missing(binary: str, package: str) -> None:
    if os.environ.get("CI") or os.environ.get("IDEMD_REQUIRE_BROKERS"):
        pytest.fail(f"{binary} is missing and CI or IDEMD_REQUIRE_BROKERS is set: "
                    f"install Debian's {package} (.ci/run does)")
    print(f"\n!!!! SKIPPED: {binary} is missing: `apt-get install -y {package}` to run the "
          "broker tests (in CI they fail instead) !!!!\n", file=sys.stderr)
    pytest.skip(f"{binary} is missing")


def _wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path, within: float) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"broker exited: {log.read_text(errors='replace')}") from None
            time.sleep(0.1)
    raise RuntimeError(f"broker did not listen on {port}: {log.read_text(errors='replace')}")


@pytest.fixture(scope="session")
def rabbitmq_url() -> Iterator[str]:
    binary = _find("/usr/lib/rabbitmq/bin/rabbitmq-server", "/usr/sbin/rabbitmq-server")
    if binary is None:
        _missing("rabbitmq-server", "rabbitmq-server")
    assert binary is not None
    directory = Path(tempfile.mkdtemp(prefix="idemd-py-rabbitmq-"))
    (directory / "home").mkdir()
    # No plugins (the management plugin alone costs seconds of boot).
    (directory / "enabled_plugins").write_text("[].\n")
    (directory / "rabbitmq.conf").write_text("")
    port, dist_port, epmd_port = free_port(), free_port(), free_port()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(directory / "home"),
        "RABBITMQ_NODENAME": f"idemd-py-{uuid.uuid4().hex[:10]}@localhost",
        "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
        "RABBITMQ_NODE_PORT": str(port),
        "RABBITMQ_DIST_PORT": str(dist_port),
        "ERL_EPMD_PORT": str(epmd_port),
        "ERL_EPMD_ADDRESS": "127.0.0.1",
        "RABBITMQ_MNESIA_BASE": str(directory / "mnesia"),
        "RABBITMQ_LOG_BASE": str(directory / "log"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(directory / "enabled_plugins"),
        "RABBITMQ_CONFIG_FILE": str(directory / "rabbitmq"),
        "RABBITMQ_PID_FILE": str(directory / "pid"),
    }
    log = directory / "broker.log"
    started = time.monotonic()
    with log.open("wb") as output:
        process = subprocess.Popen([binary], env=env, stdin=subprocess.DEVNULL,
                                   stdout=output, stderr=subprocess.STDOUT)
    try:
        _wait_for_port(port, process, log, 120)
        print(f"rabbitmq-server started in {time.monotonic() - started:.1f} s", file=sys.stderr)
        yield f"amqp://guest:guest@127.0.0.1:{port}/"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        subprocess.run(["epmd", "-port", str(epmd_port), "-kill"], env=env,
                       capture_output=True, check=False, timeout=10)
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def nats_url() -> Iterator[str]:
    binary = _find("/usr/sbin/nats-server", "/usr/bin/nats-server")
    if binary is None:
        _missing("nats-server", "nats-server")
    assert binary is not None
    directory = Path(tempfile.mkdtemp(prefix="idemd-py-nats-"))
    port = free_port()
    log = directory / "broker.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [binary, "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(directory / "store")],
            stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT)
    try:
        _wait_for_port(port, process, log, 30)
        yield f"nats://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(directory, ignore_errors=True)
