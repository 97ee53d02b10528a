"""The generated message modules (compiled from the repository's protos at build time).

``pb`` is ``idem.v1`` (every request, response and enum of the API); ``status_pb2`` and
``error_details_pb2`` are the google.rpc messages idemd puts in its error details.
"""

from idemd._proto.google.rpc import error_details_pb2, status_pb2
from idemd._proto.idem.v1 import idempotency_pb2 as pb

SERVICE = "idem.v1.IdempotencyService"

__all__ = ["SERVICE", "error_details_pb2", "pb", "status_pb2"]
