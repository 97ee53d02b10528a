"""Request fingerprints computed exactly as idemd computes them (README, "Fingerprints").

    fingerprint = SHA-256("idem.v1" 0x00 mode 0x00 canonical-bytes)

mode ``json``: the RFC 8785 (JCS) form of an I-JSON document; mode ``bytes``: the
payload as given. Prefer sending the payload (``json_payload``/``bytes_payload``) and
letting the server fingerprint it; this is for callers that send ``fingerprint``, e.g.
for requests above the server's payload bound.

Refused, as the server refuses them (:class:`NotIJsonError`), because canonicalization
would otherwise merge distinct requests: duplicate object keys, lone surrogates,
integers beyond +-2^53, numbers with a fraction or exponent of magnitude 2^53 or more,
numbers with more significant digits than a double holds, i.e. whose exact value is not
the one their canonical form writes (``100.10000000000000001`` is the double of
``100.1``; ``1e-400`` underflows to 0), NaN/Infinity, and anything that is not one
JSON document.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from decimal import Decimal
from typing import Any

_DOMAIN = b"idem.v1"
_MAX_SAFE = 1 << 53
_SURROGATE = re.compile("[\ud800-\udfff]")


class NotIJsonError(ValueError):
    """The document is not I-JSON; the server would answer INVALID_ARGUMENT."""


def _domain_separated(mode: bytes, canonical: bytes) -> bytes:
    return hashlib.sha256(_DOMAIN + b"\x00" + mode + b"\x00" + canonical).digest()


def fingerprint_bytes(payload: bytes) -> bytes:
    """The 32-byte fingerprint of an opaque payload (mode ``bytes``)."""
    return _domain_separated(b"bytes", payload)


def fingerprint_json(document: str | bytes) -> bytes:
    """The 32-byte fingerprint of a JSON document (mode ``json``)."""
    return _domain_separated(b"json", canonical_json(document))


def _parse_int(literal: str) -> int:
    value = int(literal)
    if abs(value) > _MAX_SAFE:
        raise NotIJsonError(f"integer {literal} is beyond +-2^53 and cannot be compared exactly")
    return value


def _parse_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise NotIJsonError(f"number {literal} is out of range")
    if abs(value) >= _MAX_SAFE:
        raise NotIJsonError("a number of magnitude 2^53 or more cannot be compared exactly")
    canonical = _format_number(value)
    if Decimal(literal) != Decimal(canonical):
        # 100.10000000000000001 is the double of 100.1: accepting both would let
        # one amount replay the other instead of conflicting with it.
        raise NotIJsonError(
            f"the number {literal} has more significant digits than a double holds: "
            f"it would be compared as {canonical}"
        )
    return value


def _refuse_constant(name: str) -> Any:
    raise NotIJsonError(f"{name} is not JSON")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name, value in pairs:
        if name in result:
            raise NotIJsonError(f"duplicate object key {name!r}")
        result[name] = value
    return result


def _format_number(value: float) -> str:
    """ECMAScript's Number.prototype.toString, as RFC 8785 requires."""
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    # repr gives the shortest digits that round-trip; place the point after them.
    mantissa, _, exponent = repr(abs(value)).partition("e")
    integer_part, _, fraction_part = mantissa.partition(".")
    all_digits = integer_part + fraction_part
    leading_zeros = len(all_digits) - len(all_digits.lstrip("0"))
    digits = all_digits.strip("0")
    # value = 0.<digits> x 10^point
    point = len(integer_part) + int(exponent or "0") - leading_zeros
    k, n = len(digits), point
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * -n + digits
    else:
        e = n - 1
        exponent = ("+" if e >= 0 else "-") + str(abs(e))
        text = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + exponent
    return sign + text


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _format_string(value: str) -> str:
    if _SURROGATE.search(value):
        raise NotIJsonError("a lone surrogate has no UTF-8 form")
    out = []
    for char in value:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char < " ":
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _serialize(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(_format_number(value))
    elif isinstance(value, str):
        out.append(_format_string(value))
    elif isinstance(value, list):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _serialize(item, out)
        out.append("]")
    elif isinstance(value, dict):
        out.append("{")
        names = sorted(value, key=lambda name: name.encode("utf-16-be", "surrogatepass"))
        for index, name in enumerate(names):
            if index:
                out.append(",")
            out.append(_format_string(name))
            out.append(":")
            _serialize(value[name], out)
        out.append("}")
    else:  # pragma: no cover - json.loads makes nothing else
        raise NotIJsonError(f"unexpected value {value!r}")


def canonical_json(document: str | bytes) -> bytes:
    """The RFC 8785 canonical form (UTF-8) of an I-JSON document."""
    return canonical_value(parse_i_json(document))


def canonical_value(value: Any) -> bytes:
    """The RFC 8785 canonical form (UTF-8) of a value :func:`parse_i_json` made (or
    one built from such values: dicts, lists, str, int, float, bool, None)."""
    out: list[str] = []
    _serialize(value, out)
    return "".join(out).encode("utf-8")


def parse_i_json(document: str | bytes) -> Any:
    """The value of an I-JSON document; :class:`NotIJsonError` for what the server
    refuses."""
    if isinstance(document, bytes):
        try:
            document = document.decode("utf-8")
        except UnicodeDecodeError as error:
            raise NotIJsonError(f"not UTF-8: {error}") from None
    try:
        value = json.loads(
            document,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_refuse_constant,
            object_pairs_hook=_object,
        )
    except NotIJsonError:
        raise
    except (ValueError, RecursionError) as error:
        raise NotIJsonError(str(error)) from None
    # Lone surrogates are refused when serialized; check them here too, so that a
    # value outside a selection is held to the same rules.
    _serialize(value, [])
    return value
