"""idemd's Python client: make a side effect happen at most once per logical request.

    async with idemd.Client() as client:  # IDEMD_ADDR and IDEMD_TOKEN; or Client(addr, token)
        result = await idemd.execute_once(client, "payments.charge", key, payload, charge,
                                          provider_deduplicates=True)  # or lookup=...

Without asyncio (Django, Flask, Celery), the same over blocking calls:

    with idemd.SyncClient() as client:
        result = client.execute_once("payments.charge", key, payload, charge, lookup=find_charge)

After an attempt whose outcome is unknown, ``charge`` runs again only if the provider
deduplicates by ``ctx.operation_id`` (``provider_deduplicates=True``) or a ``lookup``
found nothing; with neither, the call raises :class:`OutcomeUnknownError`.

See README.md. :class:`Client` wraps every RPC; :func:`execute_once` runs the whole
client protocol (:mod:`idemd.protocol`, shared by both); :mod:`idemd.sync` is the
blocking client (``SyncClient``) and its ``execute_once``; :mod:`idemd.wsgi` the
``Idempotency-Key`` middleware for WSGI apps; :mod:`idemd.errors` has the typed exceptions; :mod:`idemd.asgi` the
``Idempotency-Key`` middleware; :mod:`idemd.fingerprint` the server's fingerprint;
:mod:`idemd.selector` the fields that define a request.
"""

from idemd.client import Client
from idemd.errors import (
    AttemptTimeoutError,
    ConfigurationError,
    ConflictError,
    EmptyTokenError,
    IdemError,
    InvalidAddressError,
    InvalidArgumentError,
    InvalidTokenError,
    LeaseLostError,
    NeedsReconciliationError,
    NotFoundError,
    OperationFailedError,
    OperationTerminalError,
    OutcomeUnknownError,
    PendingError,
    RequestMismatchError,
    RequestTooLargeError,
    ResourceExhaustedError,
    ResultExpiredError,
    StatusError,
    SupersededError,
    UnauthenticatedError,
    UnavailableError,
)
from idemd.execute import (
    EffectContext,
    Outcome,
    Result,
    Retryable,
    Success,
    Terminal,
    Unknown,
    execute_once,
)
from idemd.fingerprint import fingerprint_bytes, fingerprint_json
from idemd.retry import RetryPolicy
from idemd.selector import Selector, SelectorError

# isort: split
# The blocking client last: it is built on the modules imported above.
from idemd import sync

SyncClient = sync.Client

__all__ = [
    "AttemptTimeoutError",
    "Client",
    "ConfigurationError",
    "ConflictError",
    "EffectContext",
    "EmptyTokenError",
    "IdemError",
    "InvalidAddressError",
    "InvalidArgumentError",
    "InvalidTokenError",
    "LeaseLostError",
    "NeedsReconciliationError",
    "NotFoundError",
    "OperationFailedError",
    "OperationTerminalError",
    "Outcome",
    "OutcomeUnknownError",
    "PendingError",
    "RequestMismatchError",
    "RequestTooLargeError",
    "ResourceExhaustedError",
    "Result",
    "ResultExpiredError",
    "RetryPolicy",
    "Retryable",
    "Selector",
    "SelectorError",
    "StatusError",
    "Success",
    "SupersededError",
    "SyncClient",
    "Terminal",
    "UnauthenticatedError",
    "UnavailableError",
    "Unknown",
    "execute_once",
    "fingerprint_bytes",
    "fingerprint_json",
    "sync",
]
