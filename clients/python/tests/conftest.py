"""A real idemd server per test, on each store: the embedded store in a fresh temp data
dir, and Postgres when DATABASE_URL is set (one fresh database for the session, made
and migrated by `idemd migrate`; each test is its own tenant, so tests never see each
other's operations).

IDEMD_BIN names the server binary (default: the repository's target/debug/idemd).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

import idemd
import idemd.sync

from brokers import nats_url, rabbitmq_url  # noqa: F401 (the consumer tests' broker fixtures)
from proxy import Proxy

REPO = Path(__file__).resolve().parents[3]


def idemd_bin() -> str:
    configured = os.environ.get("IDEMD_BIN")
    candidate = Path(configured) if configured else REPO / "target/debug/idemd"
    if not candidate.is_file():
        # A failure, not a skip: a suite that quietly ran without its server
        # would pass having tested nothing.
        pytest.fail(f"no idemd binary at {candidate}: build it or set IDEMD_BIN")
    return str(candidate)


class Server:
    """One idemd store, and the server process serving it (restartable)."""

    def __init__(
        self, store: str, tmp: Path, env: dict[str, str] | None = None, database_url: str | None = None
    ) -> None:
        self.binary = idemd_bin()
        self.store = store
        self.tmp = tmp
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "IDEMD_METRICS_LISTEN": "off",
            # The tests talk plaintext on loopback; serve refuses that unless asked.
            "IDEMD_INSECURE_PLAINTEXT": "true",
            "IDEMD_MIN_LEASE": "10ms",
            # The server adds its clock margin to previous_attempt_deadline; these tests
            # time the doubt to the earlier deadline itself (the margin has the server's
            # own tests).
            "IDEMD_CLOCK_MARGIN": "0s",
            "IDEMD_LOG_FORMAT": "json",
            "RUST_LOG": "info",
            **(env or {}),
        }
        if store == "postgres":
            assert database_url is not None
            self.env["DATABASE_URL"] = database_url
        else:
            self.env["IDEMD_DATA_DIR"] = str(tmp / "data")
        self.process: subprocess.Popen[bytes] | None = None
        self.addr = ""
        self.port = 0
        self.starts = 0

    def run(self, *args: str) -> str:
        done = subprocess.run(
            [self.binary, *args], env=self.env, capture_output=True, timeout=60, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"idemd {' '.join(args)} failed: {done.stderr.decode()}")
        return done.stdout.decode().strip()

    def create_tenant(self) -> str:
        """A new tenant (tests sharing a database are isolated by their tenants)."""
        return self.run("tenant", "create", f"py-{uuid.uuid4().hex[:12]}")

    def start(self) -> None:
        """Starts serving; a restart listens on the same port."""
        self.starts += 1
        log = self.tmp / f"serve-{self.starts}.log"
        listen = f"127.0.0.1:{self.port}"
        with log.open("wb") as stderr:
            self.process = subprocess.Popen(
                [self.binary, "serve", "--listen", listen],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for line in log.read_text(errors="replace").splitlines():
                if '"idemd serving"' in line:
                    self.addr = json.loads(line)["listen"]
                    self.port = int(self.addr.rsplit(":", 1)[1])
                    return
            if self.process.poll() is not None:
                raise RuntimeError(f"idemd exited: {log.read_text()}")
            time.sleep(0.02)
        raise RuntimeError(f"idemd did not start: {log.read_text()}")

    def kill(self) -> None:
        """SIGKILL: no drain; whatever was not committed is lost."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        self.process = None

    def close(self) -> None:
        self.kill()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str | None]:
    """One fresh, migrated database on DATABASE_URL's server for the whole session."""
    base = os.environ.get("DATABASE_URL")
    if not base:
        yield None
        return
    database = f"idemd_py_{uuid.uuid4().hex[:16]}"
    url = urlunsplit(urlsplit(base)._replace(path="/" + database))
    done = subprocess.run(
        [idemd_bin(), "migrate"], env={"PATH": os.environ.get("PATH", ""), "DATABASE_URL": url},
        capture_output=True, timeout=120, check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"idemd migrate failed: {done.stderr.decode()}")
    yield url
    if shutil.which("psql"):
        subprocess.run(
            ["psql", base, "-q", "-c", f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'],
            capture_output=True, timeout=30, check=False,
        )


STORES = ["sqlite", "postgres"]


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> str:
    if request.param == "postgres" and not os.environ.get("DATABASE_URL"):
        pytest.skip("set DATABASE_URL=postgres://... to run the Postgres store's tests")
    return str(request.param)


@pytest.fixture
def server_env() -> dict[str, str]:
    """Extra server environment; a test module may override this fixture."""
    return {}


@pytest.fixture
def server(
    store: str, tmp_path: Path, server_env: dict[str, str], postgres_url: str | None
) -> Iterator[Server]:
    srv = Server(store, tmp_path, server_env, postgres_url)
    try:
        srv.token = srv.create_tenant()  # type: ignore[attr-defined]
        srv.start()
        yield srv
    finally:
        srv.close()


@pytest.fixture
async def client(server: Server) -> AsyncIterator[idemd.Client]:
    async with idemd.Client(server.addr, server.token) as c:  # type: ignore[attr-defined]
        yield c


@dataclass
class Provider:
    """A fake provider that counts business effects and can be looked up by reference."""

    effects: list[str] = field(default_factory=list)
    records: dict[str, bytes] = field(default_factory=dict)

    def effect(self, reference: str) -> bytes:
        self.effects.append(reference)
        body = json.dumps({"charge": f"ch_{len(self.effects)}", "ref": reference}).encode()
        self.records[reference] = body
        return body


@pytest.fixture
def provider() -> Provider:
    return Provider()


def key() -> str:
    return f"k-{uuid.uuid4()}"


async def eventually(predicate: object, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate() if callable(predicate) else predicate:  # type: ignore[operator]
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


#: The proxied clients' re-sends: quick at first, and in all (about 4 s, jittered) longer
#: than the channel's reconnect backoff (up to 1.2 s: idemd.wire's 1 s and gRPC's 20%
#: jitter), which a long cut grows to. With at most 0.2 s between ten sends (0.65 s on
#: average), a cut that lasted while a loaded machine ran the other owner's attempt left
#: the channel waiting to reconnect past the last re-send after the proxy was restored.
PROXIED_RETRY = idemd.RetryPolicy(initial_backoff=0.02, max_backoff=0.5, max_sends=20, call_timeout=5)


@pytest.fixture
async def proxy(server: Server) -> AsyncIterator[Proxy]:
    p = await Proxy(server.port).start()
    try:
        yield p
    finally:
        await p.close()


@pytest.fixture
async def proxied(server: Server, proxy: Proxy) -> AsyncIterator[idemd.Client]:
    """A client whose every call goes through ``proxy``."""
    policy = PROXIED_RETRY
    async with idemd.Client(proxy.addr, server.token, retry=policy) as c:  # type: ignore[attr-defined]
        yield c


# ---- the blocking client ---------------------------------------------------------


@pytest.fixture
def sync_client(server: Server) -> Iterator[idemd.sync.Client]:
    with idemd.sync.Client(server.addr, server.token) as c:  # type: ignore[attr-defined]
        yield c


class ThreadedProxy:
    """``Proxy`` on an event loop of its own thread, for blocking tests (whose body
    runs no loop): the same controls, called from the test's thread."""

    def __init__(self, upstream_port: int) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="proxy", daemon=True)
        self._thread.start()
        self.proxy: Proxy = asyncio.run_coroutine_threadsafe(
            Proxy(upstream_port).start(), self._loop
        ).result(10)
        self.addr = self.proxy.addr

    @property
    def dropped(self) -> int:
        return self.proxy.dropped

    @property
    def delayed(self) -> int:
        return self.proxy.delayed

    def drop_next_reply(self) -> None:
        self._loop.call_soon_threadsafe(self.proxy.drop_next_reply)

    def delay_replies(self, *seconds: float) -> None:
        asyncio.run_coroutine_threadsafe(self._call(lambda: self.proxy.delay_replies(*seconds)), self._loop).result(5)

    def set_connect_delay(self, seconds: float) -> None:
        self._loop.call_soon_threadsafe(setattr, self.proxy, "connect_delay", seconds)

    def cut(self) -> None:
        asyncio.run_coroutine_threadsafe(self._call(self.proxy.cut), self._loop).result(5)

    def restore(self) -> None:
        asyncio.run_coroutine_threadsafe(self._call(self.proxy.restore), self._loop).result(5)

    @staticmethod
    async def _call(fn: Any) -> None:
        fn()

    @staticmethod
    async def _cancel_the_rest() -> None:
        """Connections still forwarding (e.g. holding a delayed reply) end here."""
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.proxy.close(), self._loop).result(5)
        asyncio.run_coroutine_threadsafe(self._cancel_the_rest(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()


@pytest.fixture
def sync_proxy(server: Server) -> Iterator[ThreadedProxy]:
    p = ThreadedProxy(server.port)
    try:
        yield p
    finally:
        p.close()


@pytest.fixture
def sync_proxied(server: Server, sync_proxy: ThreadedProxy) -> Iterator[idemd.sync.Client]:
    """A blocking client whose every call goes through ``sync_proxy``."""
    policy = PROXIED_RETRY
    with idemd.sync.Client(sync_proxy.addr, server.token, retry=policy) as c:  # type: ignore[attr-defined]
        yield c
