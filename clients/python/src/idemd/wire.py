"""How both clients speak to idemd: each RPC's request as they build it, the table of
RPCs they bind on a channel, the bearer metadata and the channel's defaults.

The asyncio :class:`idemd.Client`, the blocking :class:`idemd.sync.Client` and the
protocol (:mod:`idemd.protocol`) build every request here, so a request is the same
whichever sends it. Durations are seconds (float).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

import grpc
import grpc.aio
from google.protobuf import duration_pb2
from google.protobuf.message import Message

from idemd.errors import (
    EmptyTokenError,
    FieldViolation,
    InvalidAddressError,
    InvalidArgumentError,
    InvalidTokenError,
)
from idemd.proto import SERVICE, pb

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)


def duration(seconds: float) -> duration_pb2.Duration:
    """A protobuf Duration of ``seconds``."""
    message = duration_pb2.Duration()
    message.FromTimedelta(timedelta(seconds=seconds))
    return message


def seconds(message: duration_pb2.Duration) -> float:
    """A Duration the server sent, in seconds; negative counts as zero."""
    return max(0.0, message.seconds + message.nanos / 1e9)


# ---- requests ----------------------------------------------------------------------

#: The most ``previous_fingerprints`` one Claim may carry (the server's bound): a
#: migration window spans a deployment or two, not a history of normalisations.
MAX_PREVIOUS_FINGERPRINTS = 4


def checked_previous_fingerprints(fingerprints: Sequence[bytes]) -> tuple[bytes, ...]:
    """``fingerprints`` when the server would accept them as a Claim's
    ``previous_fingerprints`` (at most 4, each exactly 32 bytes), else
    :class:`~idemd.errors.InvalidArgumentError` naming the field as the server does,
    raised here so that nothing is sent."""
    if isinstance(fingerprints, (bytes, bytearray, str)):
        # One fingerprint given where a list belongs: its bytes are not fingerprints.
        raise _invalid("previous_fingerprints", "must be a list of 32-byte fingerprints, not one value")
    listed = tuple(fingerprints)
    if len(listed) > MAX_PREVIOUS_FINGERPRINTS:
        raise _invalid("previous_fingerprints", f"must hold at most {MAX_PREVIOUS_FINGERPRINTS} fingerprints")
    for index, fingerprint in enumerate(listed):
        if not isinstance(fingerprint, (bytes, bytearray)):
            raise _invalid(f"previous_fingerprints[{index}]", "a fingerprint is bytes (32 of them)")
        if len(fingerprint) != 32:
            raise _invalid(
                f"previous_fingerprints[{index}]", f"a fingerprint is exactly 32 bytes, got {len(fingerprint)}"
            )
    return tuple(bytes(fingerprint) for fingerprint in listed)


def _invalid(field: str, description: str) -> InvalidArgumentError:
    """The error the server would answer, raised before sending."""
    return InvalidArgumentError(
        grpc.StatusCode.INVALID_ARGUMENT,
        f"{field}: {description}",
        reason="INVALID_REQUEST",
        violations=[FieldViolation(field, description)],
    )



def claim_request(
    operation: str,
    key: str,
    *,
    json_payload: str | None = None,
    bytes_payload: bytes | None = None,
    fingerprint: bytes | None = None,
    claim_token: bytes = b"",
    lease: float | None = None,
    max_attempt_duration: float | None = None,
    max_attempts: int = 0,
    retention: float | None = None,
    operation_deadline: float | None = None,
    wait: float | None = None,
    previous_fingerprints: Sequence[bytes] = (),
) -> pb.ClaimRequest:
    """A ClaimRequest; exactly one of ``json_payload``, ``bytes_payload`` and
    ``fingerprint`` identifies the request. ``previous_fingerprints``: the same
    request's fingerprints under earlier normalisations, during a migration window
    (:func:`checked_previous_fingerprints`)."""
    given = [x is not None for x in (json_payload, bytes_payload, fingerprint)]
    if sum(given) != 1:
        raise ValueError("give exactly one of json_payload, bytes_payload, fingerprint")
    request = pb.ClaimRequest(
        scope=pb.Scope(operation=operation, key=key),
        claim_token=claim_token,
        max_attempts=max_attempts,
        previous_fingerprints=checked_previous_fingerprints(previous_fingerprints),
    )
    if json_payload is not None:
        request.json_payload = json_payload
    elif bytes_payload is not None:
        request.bytes_payload = bytes_payload
    elif fingerprint is not None:
        request.fingerprint = fingerprint
    for name, value in (
        ("lease", lease),
        ("max_attempt_duration", max_attempt_duration),
        ("retention", retention),
        ("operation_deadline", operation_deadline),
        ("wait", wait),
    ):
        if value is not None:
            getattr(request, name).CopyFrom(duration(value))
    return request


def claim_wait(request: pb.ClaimRequest) -> float:
    """How long the server may hold this Claim (its ``wait``): added to each send's timeout."""
    return seconds(request.wait) if request.HasField("wait") else 0.0


def renew_request(operation_id: str, fence: int, lease: float | None) -> pb.RenewRequest:
    request = pb.RenewRequest(operation_id=operation_id, fence=fence)
    if lease is not None:
        request.lease.CopyFrom(duration(lease))
    return request


def complete_request(
    operation_id: str, fence: int, body: bytes, content_type: str, metadata: Mapping[str, str] | None
) -> pb.CompleteRequest:
    return pb.CompleteRequest(
        operation_id=operation_id,
        fence=fence,
        result=pb.Result(body=body, content_type=content_type, metadata=metadata or {}),
    )


def fail_request(
    operation_id: str,
    fence: int,
    disposition: pb.FailDisposition,
    code: str,
    message: str,
    metadata: Mapping[str, str] | None,
    retry_after: float | None,
) -> pb.FailRequest:
    request = pb.FailRequest(
        operation_id=operation_id,
        fence=fence,
        disposition=disposition,
        error=pb.OperationError(code=code, message=message, metadata=metadata or {}),
    )
    if retry_after is not None:
        request.retry_after.CopyFrom(duration(retry_after))
    return request


def lookup_request(
    operation_id: str | None, operation: str | None, key: str | None, include_history: bool
) -> pb.LookupRequest:
    request = pb.LookupRequest(include_history=include_history)
    if operation_id is not None:
        request.operation_id = operation_id
    elif operation is not None and key is not None:
        request.scope.CopyFrom(pb.Scope(operation=operation, key=key))
    else:
        raise ValueError("give operation_id, or operation and key")
    return request


def reconcile_request(
    operation_id: str,
    expected_fence: int,
    succeeded: pb.Result | None,
    failed: pb.OperationError | None,
    not_applied: bool,
) -> pb.ReconcileRequest:
    if sum([succeeded is not None, failed is not None, not_applied]) != 1:
        raise ValueError("give exactly one of succeeded, failed, not_applied")
    request = pb.ReconcileRequest(operation_id=operation_id, expected_fence=expected_fence)
    if succeeded is not None:
        request.succeeded.CopyFrom(succeeded)
    elif failed is not None:
        request.failed.CopyFrom(failed)
    else:
        request.not_applied.SetInParent()
    return request


def channel_options(options: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """:data:`DEFAULT_CHANNEL_OPTIONS` with ``options`` added (and overriding them)."""
    given = dict(options)
    return [*((k, v) for k, v in DEFAULT_CHANNEL_OPTIONS if k not in given), *options]


def list_unresolved_request(operation: str, page_size: int, page_token: str) -> pb.ListUnresolvedRequest:
    return pb.ListUnresolvedRequest(operation=operation, page_size=page_size, page_token=page_token)


def list_operations_request(
    filter: str, page_size: int, page_token: str, order: pb.ListOperationsRequest.Order
) -> pb.ListOperationsRequest:
    return pb.ListOperationsRequest(filter=filter, page_size=page_size, page_token=page_token, order=order)


# ---- the RPCs (one table, bound by both clients) -----------------------------------


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()


@dataclass(frozen=True)
class Rpc(Generic[Req, Resp]):
    """One idemd RPC: its method name and message types."""

    name: str
    request: type[Req]
    response: type[Resp]

    def bind(self, channel: grpc.Channel | grpc.aio.Channel) -> Any:
        """The RPC's multicallable on ``channel`` (a blocking or an asyncio one, as the
        channel is)."""
        return channel.unary_unary(
            f"/{SERVICE}/{self.name}",
            request_serializer=_serialize,
            response_deserializer=self.response.FromString,
        )


CLAIM = Rpc("Claim", pb.ClaimRequest, pb.ClaimResponse)
RENEW = Rpc("Renew", pb.RenewRequest, pb.RenewResponse)
COMPLETE = Rpc("Complete", pb.CompleteRequest, pb.CompleteResponse)
FAIL = Rpc("Fail", pb.FailRequest, pb.FailResponse)
LOOKUP = Rpc("Lookup", pb.LookupRequest, pb.LookupResponse)
RECONCILE = Rpc("Reconcile", pb.ReconcileRequest, pb.ReconcileResponse)
LIST_UNRESOLVED = Rpc("ListUnresolved", pb.ListUnresolvedRequest, pb.ListUnresolvedResponse)
LIST_OPERATIONS = Rpc("ListOperations", pb.ListOperationsRequest, pb.ListOperationsResponse)
RPCS: tuple[Rpc[Any, Any], ...] = (
    CLAIM, RENEW, COMPLETE, FAIL, LOOKUP, RECONCILE, LIST_UNRESOLVED, LIST_OPERATIONS,
)


def bind_rpcs(channel: grpc.Channel | grpc.aio.Channel) -> dict[Rpc[Any, Any], Any]:
    """Every RPC of :data:`RPCS` bound on ``channel``."""
    return {rpc: rpc.bind(channel) for rpc in RPCS}


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    """The metadata every call carries."""
    return (("authorization", f"Bearer {token}"),)


# ---- address and token (the convention every idemd client follows) -----------------

#: Where the clients read the address and the token when none is passed.
ENV_ADDR = "IDEMD_ADDR"
ENV_TOKEN = "IDEMD_TOKEN"
# gRPC's own name-resolver schemes, passed through as they are (a host:port is what
# the convention promises; these kept working before it and still do).
_GRPC_SCHEMES = ("dns:", "unix:", "unix-abstract:", "ipv4:", "ipv6:")
# Where Linux distributions keep the system's CA bundle, when OpenSSL's default path
# (SSL_CERT_FILE, or the one it was built with) holds none.
_CA_BUNDLES = (
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/ssl/ca-bundle.pem",
)


@dataclass(frozen=True)
class Endpoint:
    """Where and how a client connects: the target as gRPC dials it, and the channel
    credentials (None: plaintext)."""

    target: str
    credentials: grpc.ChannelCredentials | None


def resolve_token(token: str | None) -> str:
    """``token``, else ``IDEMD_TOKEN``; refused at once when empty or unsendable."""
    value = os.environ.get(ENV_TOKEN, "") if token is None else token
    if value == "":
        raise EmptyTokenError(
            f"idemd: empty token: pass token= or set {ENV_TOKEN} (every RPC needs "
            "`authorization: Bearer <token>`; `idemd tenant create` prints one)"
        )
    if any(ord(c) <= 0x20 or ord(c) >= 0x7F for c in value):
        raise InvalidTokenError(
            "idemd: the token contains whitespace, a control or a non-ASCII character "
            "(a newline read from a file?)"
        )
    return value


def resolve_endpoint(target: str | None, credentials: grpc.ChannelCredentials | None) -> Endpoint:
    """``target`` (else ``IDEMD_ADDR``) as ``host:port`` (plaintext, or TLS with
    ``credentials``), ``http://host:port`` (plaintext) or ``https://host:port`` (TLS:
    ``credentials``, else the system's CA roots)."""
    raw = (os.environ.get(ENV_ADDR, "") if target is None else target).strip()
    if raw == "":
        raise InvalidAddressError(
            f"idemd: no address: pass one or set {ENV_ADDR} (host:port or http(s)://host:port)"
        )
    scheme = ""
    rest = raw
    if "://" in raw:
        scheme, rest = raw.split("://", 1)
        scheme = scheme.lower()
        if scheme not in ("http", "https"):
            if raw.startswith(_GRPC_SCHEMES):
                return Endpoint(raw, credentials)
            raise InvalidAddressError(f"idemd: address {raw!r}: the scheme is http or https, not {scheme!r}")
        rest = rest[:-1] if rest.endswith("/") else rest
    elif raw.startswith(_GRPC_SCHEMES):
        return Endpoint(raw, credentials)
    parts = urlsplit("//" + rest)
    try:
        port = parts.port
    except ValueError as bad:
        raise InvalidAddressError(f"idemd: address {raw!r}: {bad}") from None
    if not parts.hostname or parts.path or parts.query or parts.fragment or "@" in parts.netloc:
        raise InvalidAddressError(f"idemd: address {raw!r}: expected host:port or http(s)://host:port")
    if port is None:
        if not scheme:
            raise InvalidAddressError(f"idemd: address {raw!r} has no port: expected host:port")
        rest = f"{parts.netloc}:{443 if scheme == 'https' else 80}"
    if scheme == "http":
        if credentials is not None:
            raise InvalidAddressError(
                f"idemd: address {raw!r} is plaintext (http://) but credentials were given: use https://"
            )
        return Endpoint(rest, None)
    if scheme == "https" and credentials is None:
        credentials = grpc.ssl_channel_credentials(root_certificates=system_roots())
    return Endpoint(rest, credentials)


def system_roots() -> bytes | None:
    """The system's CA certificates (PEM), or None for gRPC's own bundle when the
    system has none where OpenSSL or the usual distributions keep them."""
    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, paths.openssl_cafile, *_CA_BUNDLES):
        if candidate and os.path.isfile(candidate):
            with open(candidate, "rb") as bundle:
                return bundle.read()
    return None


#: gRPC's own reconnect backoff starts at 1 s and grows to 120 s; a channel in that
#: backoff fails every call at once. idemd restarts and failovers are short, so the
#: channel reconnects sooner and the retry policy (not the channel) paces re-sends.
#: (``grpc.min_reconnect_backoff_ms`` is also the connect timeout: left at its default.)
DEFAULT_CHANNEL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)
