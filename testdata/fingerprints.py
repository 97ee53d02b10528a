#!/usr/bin/env python3
"""Generator and independent checker of testdata/fingerprints.json.

The vectors are the fingerprint contract every client shares (README.md,
"Fingerprints"):

    fingerprint = SHA-256("idem.v1" 0x00 mode 0x00 canonical-bytes)

mode "json": the RFC 8785 (JCS) form of an I-JSON (RFC 7493) document; mode
"bytes": the payload as given. Documents the server must refuse are listed with
the reason. This script knows nothing of the server's code: it canonicalizes
with its own RFC 8785 implementation (Python's json module for parsing, the
ECMAScript number and string rules written out below), so that a vector both
agree on is checked twice. The server's test (tests/it/fingerprint_vectors.rs)
reads the same file and checks every vector against crates/idemd-domain/src/fingerprint.rs.

    python3 testdata/fingerprints.py           check the file against this script
    python3 testdata/fingerprints.py --write   regenerate it from VECTORS below

Standard library only.
"""

import hashlib
import json
import math
import sys
from decimal import Decimal
from pathlib import Path

FILE = Path(__file__).with_name("fingerprints.json")
MAX_SAFE = 2**53

# (name, mode, input, why-refused or None). json inputs are document text;
# bytes inputs are Python bytes.
VECTORS = [
    # --- published in README.md -------------------------------------------------
    ("readme: json payment", "json", '{"amount":1000,"currency":"EUR"}', None),
    ("readme: bytes hello", "bytes", b"hello", None),
    # --- key order and whitespace -------------------------------------------------
    ("key order does not matter", "json", '{"currency":"EUR","amount":1000}', None),
    ("whitespace does not matter", "json", ' {\n\t"amount" : 1000 ,\r\n "currency":"EUR" }\n', None),
    ("nested objects sort at every level", "json",
     '{ "b": [1, 2.50, "x"], "a": {"z": null, "y": true} }', None),
    ("keys sort by UTF-16 code units, not code points", "json",
     '{"\\ud83d\\ude00":1,"\\ufb01":2,"a":3,"B":4,"":5}', None),
    ("empty object", "json", "{}", None),
    ("empty array", "json", "[]", None),
    ("scalars at the top level", "json", "true", None),
    ("null at the top level", "json", "null", None),
    # --- strings and unicode escapes -------------------------------------------------
    ("unicode escape and literal are the same", "json", '{"a":1,"b":"\\u00e9"}', None),
    ("literal e-acute", "json", '{"b":"\u00e9","a":1}', None),
    ("surrogate pair escape becomes the literal character", "json", '"\\ud83d\\ude00"', None),
    ("escaped solidus and short escapes", "json", '"\\/\\b\\f\\n\\r\\t\\"\\\\"', None),
    ("control characters as lowercase \\u00xx", "json", '"\\u0001\\u001f\\u007f"', None),
    ("U+2028 and U+2029 stay literal", "json", '"\\u2028\\u2029"', None),
    # --- numbers -------------------------------------------------------------------
    ("1.0 is 1", "json", '{"a":1.0}', None),
    ("1 is 1", "json", '{"a":1}', None),
    ("2.50 is 2.5", "json", "2.50", None),
    ("exponent to an integer", "json", '{"amount":1e2}', None),
    ("fraction with exponent to an integer", "json", '{"amount":12.50e1}', None),
    ("small fractions", "json", '{"amount":1e2,"rate":1.5e-3}', None),
    ("negative zero is 0", "json", "-0.0", None),
    ("zero with fraction digits", "json", "0.000", None),
    ("one tenth", "json", "0.1", None),
    ("1e-7 switches to exponent form, 1e-6 does not", "json", "[1e-7, 0.000001, 1.5e-10, -2.5e-7]", None),
    ("shortest round trip digits", "json", "[0.30000000000000004, 5e-324, 123456789.12345679, 4503599627370495.5]", None),
    ("refused: more digits than the shortest round trip", "json", "123456789.123456789",
     "more significant digits than a double holds: canonically 123456789.12345679"),
    ("2^53 - 1 as a float literal", "json", '{"amount":9007199254740991.0}', None),
    ("2^53 - 1", "json", '{"amount":9007199254740991}', None),
    ("2^53 is still exact as an integer literal", "json", "9007199254740992", None),
    ("-2^53 is still exact as an integer literal", "json", "-9007199254740992", None),
    ("2^52 as a float literal", "json", "4503599627370496.0", None),
    ("1.5e3", "json", "1.5e3", None),
    ("digits in a string are text", "json", '{"note":"1.0000000000000001 in a string is text"}', None),
    # --- nested arrays -------------------------------------------------------------
    ("nested arrays keep their order", "json", '[[3,[2,[1,[]]]],{"x":[{"b":0,"a":[null,false]}]}]', None),
    # --- bytes mode ----------------------------------------------------------------
    ("bytes: empty", "bytes", b"", None),
    ("bytes: not canonicalized", "bytes", b'{"a":1}', None),
    ("bytes: any octets", "bytes", bytes([0x00, 0xFF, 0x80, 0x0A]), None),
    # --- refused, with why -----------------------------------------------------------
    ("refused: duplicate key", "json", '{"a":1,"a":2}',
     "duplicate object keys have no single meaning (I-JSON)"),
    ("refused: nested duplicate key", "json", '{"x":{"a":1,"a":1}}',
     "duplicate object keys, even with equal values"),
    ("refused: lone leading surrogate", "json", '["\\ud800"]', "a lone surrogate has no UTF-8 form"),
    ("refused: lone trailing surrogate", "json", '["\\udc00"]', "a lone surrogate has no UTF-8 form"),
    ("refused: 2^53 + 1", "json", "9007199254740993",
     "an integer beyond +-2^53: a double would make it 2^53"),
    ("refused: -(2^53 + 1)", "json", "-9007199254740993", "an integer beyond +-2^53"),
    ("refused: beyond u64", "json", "18446744073709551616", "an integer beyond +-2^53"),
    ("refused: 1e300", "json", "1e300", "a number of magnitude 2^53 or more"),
    ("refused: 1e400", "json", "1e400", "not a finite double"),
    ("refused: 2^53 + 1 as a float literal", "json", '{"amount":9007199254740993.0}',
     "magnitude 2^53 or more: a double parses it as 2^53"),
    ("refused: 2^53 as a float literal", "json", "9007199254740992.0",
     "magnitude 2^53 or more: a double of 2^53 may stand for 2^53 + 1"),
    ("refused: -(2^53 + 1) as a float literal", "json", "-9007199254740993.0",
     "magnitude 2^53 or more"),
    ("refused: 2^53 + 1 with an exponent", "json", "9.007199254740993e15", "magnitude 2^53 or more"),
    ("refused: rounds to 2^52", "json", "4503599627370496.5",
     "not an integer, but a double rounds it to one"),
    ("refused: rounds to 1", "json", "1.0000000000000001", "not an integer, but a double rounds it to 1"),
    ("refused: rounds to 100", "json", '{"amount":100.000000000000001}',
     "not an integer, but a double rounds it to 100"),
    ("refused: underflows to 0", "json", "1e-400", "not an integer, but a double rounds it to 0"),
    ("refused: nested rounding", "json", '[1, {"x":"1.5", "y":[2.0000000000000001]}]',
     "not an integer, but a double rounds it to 2"),
    ("refused: the double of 100.1", "json", '{"amount":100.10000000000000001}',
     "more significant digits than a double holds: the same double as 100.1"),
    ("refused: the double of 0.3", "json", "0.30000000000000000001",
     "more significant digits than a double holds: the same double as 0.3"),
    ("refused: a double's exact value written out", "json",
     "0.3000000000000000444089209850062616169452667236328125",
     "more significant digits than a double holds: canonically 0.30000000000000004"),
    ("refused: nested, with an exponent", "json", '[0.1, {"x": [1.00000000000000000001e-5]}]',
     "more significant digits than a double holds: the same double as 1e-5"),
    ("refused: NaN", "json", "NaN", "not JSON"),
    ("refused: trailing content", "json", "{} {}", "not one JSON document"),
    ("refused: empty document", "json", "", "not JSON"),
    ("refused: truncated", "json", '{"a":', "not JSON"),
    ("refused: trailing comma", "json", "[1,]", "not JSON"),
    ("refused: single quotes", "json", "{'a':1}", "not JSON"),
]


class Refused(Exception):
    pass


def _no_duplicates(pairs):
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise Refused("duplicate key")
    return dict(pairs)


def _integer(literal):
    value = int(literal)
    if abs(value) > MAX_SAFE:
        raise Refused("integer beyond 2^53")
    return value


def _float(literal):
    value = float(literal)
    if not math.isfinite(value) or abs(value) >= MAX_SAFE:
        raise Refused("magnitude 2^53 or more")
    # Only a literal that denotes exactly the value its canonical form writes:
    # 100.10000000000000001 is the double of 100.1 and would replay it.
    if Decimal(literal) != Decimal(es_number(value)):
        raise Refused("more significant digits than a double holds")
    return value


def _constant(name):
    raise Refused(f"{name} is not JSON")


def _check_strings(value):
    """Lone surrogates: Python decodes them; UTF-8 cannot hold them."""
    if isinstance(value, str):
        value.encode("utf-8")
    elif isinstance(value, list):
        for item in value:
            _check_strings(item)
    elif isinstance(value, dict):
        for name, item in value.items():
            _check_strings(name)
            _check_strings(item)


def parse_i_json(document):
    try:
        value = json.loads(
            document,
            object_pairs_hook=_no_duplicates,
            parse_int=_integer,
            parse_float=_float,
            parse_constant=_constant,
        )
        _check_strings(value)
    except (ValueError, UnicodeEncodeError) as error:
        raise Refused(str(error)) from error
    return value


def es_number(value):
    """ECMAScript Number::toString, as RFC 8785 section 3.2.2.3 requires."""
    if value == 0:
        return "0"
    if value < 0:
        return "-" + es_number(-value)
    # repr gives the shortest digits that round-trip, as ECMAScript does.
    mantissa, _, exponent = repr(float(value)).partition("e")
    integer, _, fraction = mantissa.partition(".")
    digits = (integer + fraction).lstrip("0")
    point = len(integer.lstrip("0")) if integer.strip("0") else -(len(fraction) - len(fraction.lstrip("0")))
    point += int(exponent or 0)
    digits = digits.rstrip("0")
    k, n = len(digits), point
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + digits
    sign = "+" if n - 1 >= 0 else "-"
    head = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{head}e{sign}{abs(n - 1)}"


_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def es_string(text):
    out = []
    for char in text:
        if char in _SHORT:
            out.append(_SHORT[char])
        elif ord(char) < 0x20:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def jcs(value):
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return es_number(float(value))
    if isinstance(value, str):
        return es_string(value)
    if isinstance(value, list):
        return "[" + ",".join(jcs(item) for item in value) + "]"
    # Properties sorted by their names' UTF-16 code units.
    names = sorted(value, key=lambda name: name.encode("utf-16-be"))
    return "{" + ",".join(es_string(name) + ":" + jcs(value[name]) for name in names) + "}"


def fingerprint(mode, canonical):
    return hashlib.sha256(b"idem.v1\x00" + mode.encode() + b"\x00" + canonical).hexdigest()


def vector(name, mode, payload, why):
    entry = {"name": name, "mode": mode}
    if mode == "bytes":
        entry["input_hex"] = payload.hex()
        entry["fingerprint"] = fingerprint(mode, payload)
        return entry
    entry["input"] = payload
    try:
        canonical = jcs(parse_i_json(payload))
    except Refused as error:
        if why is None:
            raise SystemExit(f"{name}: refused by this checker ({error}) but listed as valid")
        entry["refused"] = why
        return entry
    if why is not None:
        raise SystemExit(f"{name}: accepted by this checker but listed as refused ({why})")
    entry["canonical"] = canonical
    entry["fingerprint"] = fingerprint(mode, canonical.encode("utf-8"))
    return entry


def document():
    return {
        "description": "Fingerprint test vectors of idem.v1: SHA-256(\"idem.v1\" 0x00 mode 0x00 "
        "canonical-bytes), mode json (RFC 8785 form of an I-JSON document) or bytes (as "
        "given). Generated and checked by testdata/fingerprints.py; the server checks "
        "every vector in tests/it/fingerprint_vectors.rs.",
        "fields": {
            "name": "what the vector shows",
            "mode": "json (input is the json_payload text) or bytes (input_hex is the bytes_payload)",
            "canonical": "json only: the RFC 8785 canonical text that is hashed (UTF-8)",
            "fingerprint": "lowercase hex of the 32-byte fingerprint",
            "refused": "json only, instead of canonical and fingerprint: why the server answers "
            "INVALID_ARGUMENT (and a client must refuse the document too)",
        },
        "vectors": [vector(*entry) for entry in VECTORS],
    }


def check_or_write(file, document, count, checker):
    """Writes `document` to `file` with --write; else checks that `file` holds it."""
    expected = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    if sys.argv[1:] == ["--write"]:
        file.write_text(expected, encoding="utf-8")
        print(f"wrote {file} ({count} vectors)")
        return 0
    if sys.argv[1:]:
        print(sys.modules["__main__"].__doc__)
        return 2
    actual = file.read_text(encoding="utf-8")
    if actual != expected:
        print(f"{file} differs from what testdata/{checker} computes; "
              "run it with --write and review the diff", file=sys.stderr)
        return 1
    print(f"{file.name}: {count} vectors agree with this checker")
    return 0


def main():
    return check_or_write(FILE, document(), len(VECTORS), "fingerprints.py")


if __name__ == "__main__":
    sys.exit(main())
