"""The generated message modules (compiled from the repository's protos at build time).

``pb`` is ``idem.v1`` (every request, response and enum of the API); ``status_pb2`` and
``error_details_pb2`` are the google.rpc messages idemd puts in its error details,
compiled from the repository's copy under a private package
(``idemd.vendored.rpc``) so that they never clash with googleapis-common-protos'
``google.rpc`` in protobuf's process-wide pool. Same wire format; pack them into an
``Any`` with :func:`pack_detail` to get the ``type.googleapis.com/google.rpc.*`` URL.
"""

from google.protobuf import any_pb2
from google.protobuf.message import Message

from idemd._proto.idem.v1 import idempotency_pb2 as pb
from idemd._proto.idemd_rpc import error_details_pb2, status_pb2

SERVICE = "idem.v1.IdempotencyService"
_PRIVATE_PACKAGE = "idemd.vendored.rpc."


def rpc_type_name(message: Message) -> str:
    """The public name of a google.rpc message (``google.rpc.ErrorInfo``)."""
    name = message.DESCRIPTOR.full_name
    if name.startswith(_PRIVATE_PACKAGE):
        return "google.rpc." + name.removeprefix(_PRIVATE_PACKAGE)
    return name


def pack_detail(message: Message) -> any_pb2.Any:
    """An ``Any`` holding a google.rpc message under its public type URL."""
    return any_pb2.Any(
        type_url=f"type.googleapis.com/{rpc_type_name(message)}",
        value=message.SerializeToString(),
    )


def unpack_detail(detail: any_pb2.Any, message: Message) -> bool:
    """Parses ``detail`` into ``message`` when it holds that google.rpc type."""
    if detail.type_url.rsplit("/", 1)[-1] != rpc_type_name(message):
        return False
    message.ParseFromString(detail.value)
    return True


__all__ = ["SERVICE", "error_details_pb2", "pack_detail", "pb", "status_pb2", "unpack_detail"]
