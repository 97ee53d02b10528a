"""Item: the fingerprint function, identical to the server's (README "Fingerprints")."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

import idemd
from idemd.fingerprint import NotIJsonError, canonical_json, fingerprint_bytes, fingerprint_json

from conftest import key

SHARED_VECTORS = Path(__file__).resolve().parents[3] / "testdata" / "fingerprints.json"


def test_readme_vectors() -> None:
    assert fingerprint_json('{"amount":1000,"currency":"EUR"}').hex() == (
        "b1b2b87aead43d01e114b4767c954105984d07bacaad3c276b7fd8c0bf6ea63a"
    )
    assert fingerprint_json('{ "currency" : "EUR",\n "amount": 1000 }').hex() == (
        "b1b2b87aead43d01e114b4767c954105984d07bacaad3c276b7fd8c0bf6ea63a"
    )
    assert fingerprint_bytes(b"hello").hex() == (
        "94d0eb7fa404bbd41180fb4f0890630b7d516de1603730ecb60dc2e5e9dd1e55"
    )


CANONICAL = [
    ('{ "b": [1, 2.50, "x"], "a": {"z": null, "y": true} }', '{"a":{"y":true,"z":null},"b":[1,2.5,"x"]}'),
    ('{"amount":1e2,"rate":1.5e-3}', '{"amount":100,"rate":0.0015}'),
    ('{"amount":9007199254740991.0}', '{"amount":9007199254740991}'),
    ('{"amount":12.50e1}', '{"amount":125}'),
    ("[1e-7, 1.5e-7, 0.000001, 123456789012345.6, -0.0, -0, 5e-324]",
     "[1e-7,1.5e-7,0.000001,123456789012345.6,0,0,5e-324]"),
    ('"\\u00e9\\u2028\\u007f\\u0001\\"\\\\/\\b\\f\\n\\r\\t"', '"\u00e9\u2028\u007f\\u0001\\"\\\\/\\b\\f\\n\\r\\t"'),
    # Keys sort by UTF-16 code units: U+E000 before U+1F600 (a surrogate pair).
    ('{"\\ud83d\\ude00":2,"\\ue000":1,"a":3,"":0}', '{"":0,"a":3,"\U0001f600":2,"\ue000":1}'),
]


@pytest.mark.parametrize(("document", "canonical"), CANONICAL)
def test_canonical_form(document: str, canonical: str) -> None:
    assert canonical_json(document) == canonical.encode()


REFUSED = [
    '{"a":1,"a":2}', '{"x":{"a":1,"a":1}}', '["\\ud800"]', '["\\udc00"]',
    "9007199254740993", "-9007199254740993", "18446744073709551616", "1e300", "1e400",
    "{} {}", "", '{"a":', '{"amount":9007199254740993.0}', "9007199254740992.0",
    "9.007199254740993e15", "4503599627370496.5", "1.0000000000000001",
    '{"amount":100.000000000000001}', "1e-400", '[1, {"x":"1.5", "y":[2.0000000000000001]}]',
    "NaN", "Infinity", "[01]", "'a'",
]
ACCEPTED = [
    "9007199254740992", "-9007199254740992", "0.1", "1.5e3", '"\\ud83d\\ude00"',
    "9007199254740991.0", "-9007199254740991.0", "4503599627370496.0", "1e2", "12.50e1",
    "0.000", "-0.0", "1.5", '{"note":"1.0000000000000001 in a string is text"}', " [true,false,null] ",
]


@pytest.mark.parametrize("document", REFUSED)
def test_not_i_json_is_refused(document: str) -> None:
    with pytest.raises(NotIJsonError):
        fingerprint_json(document)


@pytest.mark.parametrize("document", ACCEPTED)
def test_i_json_is_accepted(document: str) -> None:
    assert len(fingerprint_json(document)) == 32


async def test_the_server_computes_the_same_fingerprints(client: idemd.Client) -> None:
    """Differential: the server fingerprints json_payload/bytes_payload itself and
    Lookup returns what it stored; every document refused here is refused there."""
    for document in [doc for doc, _ in CANONICAL] + ACCEPTED:
        k = key()
        await client.claim("fp.check", k, json_payload=document)
        stored = (await client.lookup(operation="fp.check", key=k)).operation.fingerprint
        assert stored == fingerprint_json(document), document
    for document in REFUSED:
        with pytest.raises(idemd.InvalidArgumentError):
            await client.claim("fp.check", key(), json_payload=document)
    for payload in [b"", b"hello", bytes(range(256))]:
        k = key()
        await client.claim("fp.check", k, bytes_payload=payload)
        stored = (await client.lookup(operation="fp.check", key=k)).operation.fingerprint
        assert stored == fingerprint_bytes(payload)
    # A client-computed fingerprint matches the server's: a replay, not a conflict.
    k = key()
    claimed = await client.claim("fp.check", k, json_payload='{"b":1,"a":2}')
    owner = claimed.acquired.ownership
    await client.complete(owner.operation_id, owner.fence, b"ok")
    again = await client.claim("fp.check", k, fingerprint=fingerprint_json('{"a":2,"b":1}'))
    assert again.WhichOneof("outcome") == "completed"


def _shared_cases() -> list[dict[str, Any]]:
    data = json.loads(SHARED_VECTORS.read_text())
    cases = data if isinstance(data, list) else data.get("vectors") or data.get("cases")
    assert isinstance(cases, list), f"{SHARED_VECTORS}: expected a list of cases"
    return cases


def _field(case: dict[str, Any], *names: str) -> Any:
    for name in names:
        if name in case:
            return case[name]
    return None


def test_shared_fingerprint_vectors_in_testdata() -> None:
    """Every vector of ../../testdata/fingerprints.json (shared by every client)."""
    if not SHARED_VECTORS.is_file():
        pytest.skip(f"{SHARED_VECTORS} does not exist yet; the README's vectors are tested above")
    for case in _shared_cases():
        mode = _field(case, "mode") or "json"
        raw: Any = _field(case, "input", "payload", "document", "json")
        if raw is None and (hexed := _field(case, "input_hex", "payload_hex", "bytes_hex")) is not None:
            raw = bytes.fromhex(hexed)
        if raw is None and (b64 := _field(case, "input_base64", "payload_base64")) is not None:
            raw = base64.b64decode(b64)
        assert raw is not None, f"a case without input: {case}"
        expected = _field(case, "fingerprint", "fingerprint_hex", "sha256", "expected")
        refused = case.get("valid") is False or "error" in case or expected is None
        if mode == "bytes":
            payload = raw if isinstance(raw, bytes) else raw.encode()
            assert fingerprint_bytes(payload).hex() == expected, case
        elif refused:
            with pytest.raises(NotIJsonError):
                fingerprint_json(raw)
        else:
            assert fingerprint_json(raw).hex() == expected, case
            if (canonical := _field(case, "canonical", "jcs")) is not None:
                assert canonical_json(raw).decode() == canonical, case
