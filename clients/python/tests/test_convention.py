"""Item: the convention every idemd client follows: the address as host:port or
http(s)://host:port, IDEMD_ADDR and IDEMD_TOKEN read by default, an empty token refused
at once with a typed error, before any connection."""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any

import grpc
import pytest

import idemd
from idemd import wire

from conftest import Server, key


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("IDEMD_ADDR", raising=False)
    monkeypatch.delenv("IDEMD_TOKEN", raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    ("address", "target", "tls"),
    [
        ("127.0.0.1:50051", "127.0.0.1:50051", False),
        ("idemd.internal:50051", "idemd.internal:50051", False),
        ("[::1]:50051", "[::1]:50051", False),
        (" http://idemd.internal:8080 ", "idemd.internal:8080", False),
        ("http://idemd.internal:8080/", "idemd.internal:8080", False),
        ("HTTPS://idemd.example.com:443", "idemd.example.com:443", True),
        ("https://idemd.example.com", "idemd.example.com:443", True),
        ("http://idemd.internal", "idemd.internal:80", False),
        # gRPC's own resolver targets keep working as they did.
        ("dns:///idemd.internal:50051", "dns:///idemd.internal:50051", False),
        ("unix:///run/idemd.sock", "unix:///run/idemd.sock", False),
    ],
)
def test_addresses_are_host_port_or_http_or_https(address: str, target: str, tls: bool) -> None:
    endpoint = wire.resolve_endpoint(address, None)
    assert endpoint.target == target
    assert (endpoint.credentials is not None) == tls


@pytest.mark.parametrize(
    "address",
    ["", "   ", "idemd.internal", "127.0.0.1", "grpc://idemd:1", "http://", "http://idemd:1/v1",
     "http://idemd:1?x=1", "http://user@idemd:1", "idemd:port", "idemd:99999"],
)
def test_malformed_addresses_are_refused_with_a_typed_error(address: str) -> None:
    with pytest.raises(idemd.InvalidAddressError) as refused:
        wire.resolve_endpoint(address, None)
    assert isinstance(refused.value, ValueError) and isinstance(refused.value, idemd.IdemError)


def test_https_verifies_against_the_system_roots_unless_credentials_are_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[Any] = []
    real = grpc.ssl_channel_credentials

    def spy(root_certificates: bytes | None = None, **kwargs: Any) -> grpc.ChannelCredentials:
        seen.append(root_certificates)
        return real(root_certificates, **kwargs)

    monkeypatch.setattr(grpc, "ssl_channel_credentials", spy)
    wire.resolve_endpoint("https://idemd.example.com:443", None)
    assert seen == [wire.system_roots()]
    if seen[0] is not None:
        assert b"BEGIN CERTIFICATE" in seen[0]
    given = real()
    assert wire.resolve_endpoint("https://idemd.example.com:443", given).credentials is given
    assert wire.resolve_endpoint("idemd.example.com:443", given).credentials is given
    assert len(seen) == 1  # the caller's credentials are used as they are
    with pytest.raises(idemd.InvalidAddressError, match="plaintext"):
        wire.resolve_endpoint("http://idemd.example.com:80", given)


@pytest.mark.parametrize("flavour", ["asyncio", "blocking"])
async def test_an_empty_token_is_refused_at_once_before_any_connection(
    flavour: str, no_env: pytest.MonkeyPatch
) -> None:
    # A listener that counts connections: the refusal must come before any.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.5)
    accepted: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            accepted.append(listener.accept()[0])

    watcher = threading.Thread(target=accept)
    watcher.start()
    addr = f"127.0.0.1:{listener.getsockname()[1]}"
    make = idemd.Client if flavour == "asyncio" else idemd.SyncClient
    try:
        with pytest.raises(idemd.EmptyTokenError, match="IDEMD_TOKEN"):
            make(addr, "")
        with pytest.raises(idemd.EmptyTokenError):
            make(addr)  # IDEMD_TOKEN unset
        no_env.setenv("IDEMD_TOKEN", "")
        with pytest.raises(idemd.EmptyTokenError):
            make(addr)
        no_env.setenv("IDEMD_ADDR", addr)
        with pytest.raises(idemd.EmptyTokenError):
            make()
        with pytest.raises(idemd.InvalidTokenError, match="newline"):
            make(addr, "idem_abc\n")
    finally:
        watcher.join()
        listener.close()
    assert accepted == []
    assert issubclass(idemd.EmptyTokenError, idemd.InvalidTokenError)
    assert issubclass(idemd.InvalidTokenError, idemd.ConfigurationError)
    assert issubclass(idemd.ConfigurationError, ValueError)


async def test_no_address_is_a_typed_error_naming_idemd_addr(no_env: pytest.MonkeyPatch) -> None:
    no_env.setenv("IDEMD_TOKEN", "idem_t")
    with pytest.raises(idemd.InvalidAddressError, match="IDEMD_ADDR"):
        idemd.Client()
    with pytest.raises(idemd.InvalidAddressError, match="IDEMD_ADDR"):
        idemd.SyncClient()


async def test_the_arguments_win_over_the_environment(no_env: pytest.MonkeyPatch) -> None:
    no_env.setenv("IDEMD_ADDR", "not an address")
    no_env.setenv("IDEMD_TOKEN", "")
    async with idemd.Client("127.0.0.1:1", "t"):
        pass
    with idemd.SyncClient("127.0.0.1:1", "t"):
        pass


async def test_the_environment_alone_reaches_the_server(server: Server, no_env: pytest.MonkeyPatch) -> None:
    no_env.setenv("IDEMD_ADDR", "http://" + server.addr)  # type: ignore[attr-defined]
    no_env.setenv("IDEMD_TOKEN", server.token)  # type: ignore[attr-defined]
    k = key()
    async with idemd.Client() as client:
        claimed = await client.claim("convention.env", k, bytes_payload=b"x", lease=5)
        assert claimed.WhichOneof("outcome") == "acquired"
    with idemd.SyncClient() as blocking:
        again = blocking.claim("convention.env", k, bytes_payload=b"x", lease=5)
        assert again.WhichOneof("outcome") == "pending"
