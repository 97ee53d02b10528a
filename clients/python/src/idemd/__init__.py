"""idemd's Python client: make a side effect happen at most once per logical request.

:class:`Client` wraps every RPC; :mod:`idemd.errors` has the typed exceptions;
:mod:`idemd.fingerprint` computes fingerprints exactly as the server does.
"""

from idemd.client import Client
from idemd.errors import (
    AttemptTimeoutError,
    ConflictError,
    IdemError,
    InvalidArgumentError,
    LeaseLostError,
    NeedsReconciliationError,
    NotFoundError,
    OperationFailedError,
    OperationTerminalError,
    OutcomeUnknownError,
    PendingError,
    RequestMismatchError,
    ResourceExhaustedError,
    ResultExpiredError,
    StatusError,
    SupersededError,
    UnauthenticatedError,
    UnavailableError,
)
from idemd.fingerprint import fingerprint_bytes, fingerprint_json
from idemd.retry import RetryPolicy

__all__ = [
    "AttemptTimeoutError",
    "Client",
    "ConflictError",
    "IdemError",
    "InvalidArgumentError",
    "LeaseLostError",
    "NeedsReconciliationError",
    "NotFoundError",
    "OperationFailedError",
    "OperationTerminalError",
    "OutcomeUnknownError",
    "PendingError",
    "RequestMismatchError",
    "ResourceExhaustedError",
    "ResultExpiredError",
    "RetryPolicy",
    "StatusError",
    "SupersededError",
    "UnauthenticatedError",
    "UnavailableError",
    "fingerprint_bytes",
    "fingerprint_json",
]
