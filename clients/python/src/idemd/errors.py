"""Typed exceptions for idemd's gRPC statuses, decoded from their google.rpc details.

Every status idemd sends carries a ``google.rpc.Status`` in the
``grpc-status-details-bin`` trailer with an ``ErrorInfo`` (domain ``idem.v1``) whose
reason is stable API; INVALID_ARGUMENT adds ``BadRequest`` and UNAVAILABLE adds
``RetryInfo``. :func:`from_rpc_error` turns a ``grpc.RpcError`` into the most specific
class below: branch on the class (or on ``reason``), never on the message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import grpc
from google.protobuf.message import DecodeError

from idemd.proto import error_details_pb2, pb, status_pb2, unpack_detail

DOMAIN = "idem.v1"
STATUS_DETAILS_KEY = "grpc-status-details-bin"


@dataclass(frozen=True)
class FieldViolation:
    """One BadRequest field violation: the field as named in the proto (``scope.key``)."""

    field: str
    description: str


class IdemError(Exception):
    """Base of every error this package raises."""


class ConfigurationError(IdemError, ValueError):
    """A client was given what it cannot work with (raised by the constructor, before
    any connection is made)."""


class InvalidAddressError(ConfigurationError):
    """No address, or one that is not ``host:port`` or ``http(s)://host:port``."""


class InvalidTokenError(ConfigurationError):
    """A token no call could succeed with: whitespace or a control character in it
    (often a newline read from a file)."""


class EmptyTokenError(InvalidTokenError):
    """No token, or an empty one: every RPC needs ``authorization: Bearer <token>``,
    and the server would refuse each with UNAUTHENTICATED."""


class StatusError(IdemError):
    """A gRPC status from idemd (or from the transport when ``reason`` is None)."""

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        *,
        reason: str | None = None,
        metadata: Mapping[str, str] | None = None,
        retry_after: float | None = None,
        violations: Sequence[FieldViolation] = (),
    ) -> None:
        super().__init__(f"{code.name}: {message}" + (f" ({reason})" if reason else ""))
        self.code = code
        self.message = message
        #: The ErrorInfo reason (``LEASE_LOST``, ...); None when the status had no
        #: ErrorInfo, e.g. a connection that failed before reaching idemd.
        self.reason = reason
        self.metadata: Mapping[str, str] = dict(metadata or {})
        #: RetryInfo's delay in seconds, when the status carried one.
        self.retry_after = retry_after
        self.violations: tuple[FieldViolation, ...] = tuple(violations)

    @property
    def operation_id(self) -> str | None:
        return self.metadata.get("operation_id")

    @property
    def state(self) -> str | None:
        """The operation's state as idemd named it (``IN_PROGRESS``, ``SUCCEEDED``...)."""
        return self.metadata.get("state")


class InvalidArgumentError(StatusError):
    """INVALID_ARGUMENT (``INVALID_REQUEST``): ``violations`` names each field."""


class UnauthenticatedError(StatusError):
    """UNAUTHENTICATED: no token (``MISSING_CREDENTIALS``) or a bad one (``INVALID_CREDENTIALS``)."""


class PermissionDeniedError(StatusError):
    """PERMISSION_DENIED."""


class NotFoundError(StatusError):
    """NOT_FOUND (``OPERATION_NOT_FOUND``): no such operation, or another tenant's."""


class FailedPreconditionError(StatusError):
    """FAILED_PRECONDITION: a request the operation's state refuses."""


class ConflictError(FailedPreconditionError):
    """``IDEMPOTENCY_KEY_REUSED``: the key was used with a different request.

    Never a replay and never a new execution; ``operation_id`` names the operation
    that holds the key.
    """


class ResultExpiredError(FailedPreconditionError):
    """``RESULT_EXPIRED``: the key's result passed retention; it is never executed again."""


class OperationTerminalError(FailedPreconditionError):
    """``OPERATION_TERMINAL``: the operation already ended."""


class RequestMismatchError(FailedPreconditionError):
    """``REQUEST_MISMATCH``: the same fence re-sent with a different request."""


class LeaseStillLiveError(FailedPreconditionError):
    """``LEASE_STILL_LIVE``: Reconcile while an owner holds the lease."""


class AttemptStillRunningError(FailedPreconditionError):
    """``ATTEMPT_STILL_RUNNING``: NOT_APPLIED before the last attempt's deadline."""


class AttemptDeadlinePassedError(FailedPreconditionError):
    """``ATTEMPT_DEADLINE_PASSED``: the owner's attempt deadline passed; it may not write."""


class StateForbidsError(FailedPreconditionError):
    """``STATE_FORBIDS``: any other write the state forbids."""


class AbortedError(StatusError):
    """ABORTED."""


class LeaseLostError(AbortedError):
    """``LEASE_LOST``: the write carried a stale fence; another owner or a reconciler took over.

    Look the operation up and answer with what is stored; never redo the effect.
    """

    @property
    def current_fence(self) -> int | None:
        value = self.metadata.get("current_fence")
        return int(value) if value is not None and value.isdigit() else None


class UnavailableError(StatusError):
    """UNAVAILABLE: re-send unchanged after ``retry_after`` (RetryInfo) or a backoff."""


class DeadlineExceededError(StatusError):
    """DEADLINE_EXCEEDED: the call's deadline passed; whether it took effect is unknown."""


class ResourceExhaustedError(StatusError):
    """RESOURCE_EXHAUSTED: overload or a quota; re-send after ``retry_after``."""


class RequestTooLargeError(ResourceExhaustedError):
    """RESOURCE_EXHAUSTED ``REQUEST_TOO_LARGE``: the message is longer than any legal
    request. Never re-sent: the same bytes would be refused again."""


class InternalError(StatusError):
    """INTERNAL or any code idemd does not send on purpose."""


_BY_REASON: dict[str, type[StatusError]] = {
    "IDEMPOTENCY_KEY_REUSED": ConflictError,
    "RESULT_EXPIRED": ResultExpiredError,
    "OPERATION_TERMINAL": OperationTerminalError,
    "REQUEST_MISMATCH": RequestMismatchError,
    "LEASE_STILL_LIVE": LeaseStillLiveError,
    "ATTEMPT_STILL_RUNNING": AttemptStillRunningError,
    "ATTEMPT_DEADLINE_PASSED": AttemptDeadlinePassedError,
    "STATE_FORBIDS": StateForbidsError,
    "LEASE_LOST": LeaseLostError,
    "REQUEST_TOO_LARGE": RequestTooLargeError,
}

_BY_CODE: dict[grpc.StatusCode, type[StatusError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.ABORTED: AbortedError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
}


def from_status(
    code: grpc.StatusCode, message: str, details: bytes | None
) -> StatusError:
    """The typed error for a status and its ``grpc-status-details-bin`` bytes (if any)."""
    reason: str | None = None
    metadata: dict[str, str] = {}
    retry_after: float | None = None
    violations: list[FieldViolation] = []
    if details:
        status = status_pb2.Status()
        try:
            status.ParseFromString(details)
        except DecodeError:
            status = status_pb2.Status()
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            retry = error_details_pb2.RetryInfo()
            bad = error_details_pb2.BadRequest()
            try:
                if unpack_detail(detail, info):
                    if info.domain == DOMAIN or reason is None:
                        reason = info.reason
                        metadata = dict(info.metadata)
                elif unpack_detail(detail, retry):
                    retry_after = max(0.0, retry.retry_delay.ToTimedelta().total_seconds())
                elif unpack_detail(detail, bad):
                    violations.extend(
                        FieldViolation(v.field, v.description) for v in bad.field_violations
                    )
            except DecodeError:
                continue
    cls = (reason and _BY_REASON.get(reason)) or _BY_CODE.get(code, InternalError)
    return cls(
        code,
        message,
        reason=reason,
        metadata=metadata,
        retry_after=retry_after,
        violations=violations,
    )


def from_rpc_error(error: grpc.RpcError) -> StatusError:
    """Decodes a ``grpc.RpcError`` (sync) or ``grpc.aio.AioRpcError`` into a typed error."""
    code_of = getattr(error, "code", None)
    code = code_of() if callable(code_of) else grpc.StatusCode.UNKNOWN
    if not isinstance(code, grpc.StatusCode):
        code = grpc.StatusCode.UNKNOWN
    details_of = getattr(error, "details", None)
    message = details_of() if callable(details_of) else str(error)
    trailers_of = getattr(error, "trailing_metadata", None)
    trailers = trailers_of() if callable(trailers_of) else None
    details: bytes | None = None
    for key, value in trailers or ():
        if key == STATUS_DETAILS_KEY and isinstance(value, bytes):
            details = value
    return from_status(code, str(message or ""), details)


# ---- outcomes of execute_once that are not gRPC statuses --------------------


class OperationFailedError(IdemError):
    """The operation ended with a terminal error, stored and replayed (state FAILED).

    ``error`` is the stored ``OperationError``: its ``code``, ``message``, ``metadata``
    and ``reason`` (TERMINAL, ATTEMPTS_EXHAUSTED or DEADLINE_EXCEEDED).
    """

    def __init__(
        self, operation_id: str, error: pb.OperationError, *, replayed: bool
    ) -> None:
        reason = pb.FailureReason.Name(error.reason)
        super().__init__(
            f"operation {operation_id} failed: {error.code or reason}: {error.message}"
        )
        self.operation_id = operation_id
        self.error = error
        self.code = error.code
        self.reason = reason
        #: True when this call replayed a failure stored by an earlier call.
        self.replayed = replayed


class NeedsReconciliationError(IdemError):
    """The attempt budget is spent on unknown outcomes: only Reconcile resolves it."""

    def __init__(self, operation_id: str, fence: int, attempts: int) -> None:
        super().__init__(
            f"operation {operation_id} needs reconciliation "
            f"(fence {fence}, {attempts} attempts); nothing was executed"
        )
        self.operation_id = operation_id
        self.fence = fence
        self.attempts = attempts


class OutcomeUnknownError(IdemError):
    """This attempt's effect may or may not have happened; idemd was told UNKNOWN
    (or could not be told). The next owner reconciles first; nothing is redone."""

    def __init__(self, operation_id: str, message: str) -> None:
        super().__init__(f"operation {operation_id}: {message}")
        self.operation_id = operation_id


class AttemptTimeoutError(OutcomeUnknownError):
    """The effect was cancelled at the attempt deadline; its outcome is unknown."""


class PendingError(IdemError):
    """The operation is still in progress elsewhere (or its retry is not yet due) and the
    caller's deadline passed: nothing was executed; try again after ``retry_after``."""

    def __init__(self, operation_id: str, retry_after: float, reason: str) -> None:
        super().__init__(
            f"operation {operation_id} is pending ({reason}); retry after {retry_after:.3f}s"
        )
        self.operation_id = operation_id
        self.retry_after = retry_after
        self.reason = reason


class SupersededError(IdemError):
    """A newer owner or a reconciler took the operation while this call held it, and it
    has not ended yet: what is stored stands and the effect is never redone."""

    def __init__(self, operation: pb.Operation | None) -> None:
        state = pb.OperationState.Name(operation.state) if operation else "unknown"
        op_id = operation.operation_id if operation else "?"
        super().__init__(f"operation {op_id} was taken over; now {state}")
        self.operation = operation


class UnrecognisedOutcomeError(IdemError):
    """The server answered a Claim outcome this client does not know: nothing executed."""
