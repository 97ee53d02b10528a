"""idemd's Python client: make a side effect happen at most once per logical request.

:class:`Client` wraps every RPC; :mod:`idemd.errors` has the typed exceptions.
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
]
