#!/usr/bin/env python3
"""Generator and independent checker of testdata/selectors.json.

The vectors are the request-selector contract every client shares (docs/api.md,
"Request selectors"): a selector picks the fields that define a request (JSON
Pointers to include and exclude, and for the HTTP middlewares request headers); the
fingerprint is then the json-mode fingerprint of the selected document, canonicalized
by testdata/fingerprints.py's own RFC 8785 implementation.

    python3 testdata/selectors.py           check the file against this script
    python3 testdata/selectors.py --write   regenerate it from VECTORS below

Standard library only.
"""

import copy
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from fingerprints import (  # noqa: E402
    Refused,
    check_or_write,
    fingerprint,
    jcs,
    parse_i_json,
)

FILE = Path(__file__).with_name("selectors.json")
TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")

PAYMENT = '{"amount":1000,"currency":"EUR","note":"for the invoice","trace_id":"t-1"}'
TRANSFER = ('{"amount":250,"recipient":{"name":"Ada","iban":"DE89370400440532013000",'
            '"meta":{"seen":3}},"items":[{"sku":"a"},{"sku":"b"}],"trace_id":"t-2"}')

# (name, body text, selector, request headers or None, refused-at or None)
# refused-at: "selector" (refused when the selector is built) or "request" (refused
# when applied to this body).
VECTORS = [
    # --- the empty selector is today's fingerprint ----------------------------------
    ("empty selector: the whole body, today's fingerprint", '{"amount":1000,"currency":"EUR"}', {}, None, None),
    ("empty lists are an empty selector", '{"currency":"EUR","amount":1000}',
     {"include": [], "exclude": []}, None, None),
    ("empty selector: any JSON body, not only objects", "[1, 2.50]", {}, None, None),
    # --- include / exclude ------------------------------------------------------------
    ("include only", PAYMENT, {"include": ["/amount", "/currency"]}, None, None),
    ("include only: a field outside the selection changed, same fingerprint",
     '{"amount":1000,"currency":"EUR","note":"another note","trace_id":"t-9"}',
     {"include": ["/amount", "/currency"]}, None, None),
    ("include only: a field inside the selection changed, another fingerprint",
     '{"amount":1001,"currency":"EUR","note":"for the invoice","trace_id":"t-1"}',
     {"include": ["/amount", "/currency"]}, None, None),
    ("exclude only", PAYMENT, {"exclude": ["/note", "/trace_id"]}, None, None),
    ("include and exclude: exclude applies to the include result", TRANSFER,
     {"include": ["/amount", "/recipient"], "exclude": ["/recipient/meta"]}, None, None),
    ("nested: intermediate objects keep only the selected members", TRANSFER,
     {"include": ["/recipient/iban", "/amount"]}, None, None),
    ("nested exclude leaves an empty object", '{"a":1,"meta":{"trace":"x"}}',
     {"exclude": ["/meta/trace"]}, None, None),
    ("overlapping: the larger subtree wins", TRANSFER,
     {"include": ["/recipient/iban", "/recipient"]}, None, None),
    ("overlapping, in the other order: the same", TRANSFER,
     {"include": ["/recipient", "/recipient/iban"]}, None, None),
    ("a pointer into an array selects nothing", TRANSFER,
     {"include": ["/items/0", "/items/0/sku", "/amount"]}, None, None),
    ("exclude into an array removes nothing", TRANSFER,
     {"include": ["/items"], "exclude": ["/items/0"]}, None, None),
    ("a pointer through a scalar selects nothing", TRANSFER,
     {"include": ["/amount/value", "/trace_id"]}, None, None),
    ("an absent member selects nothing", PAYMENT,
     {"include": ["/missing", "/missing/deeper", "/amount"], "exclude": ["/absent"]}, None, None),
    ("nothing selected: the empty object", PAYMENT, {"include": ["/missing"]}, None, None),
    ("a member whose value is null is selected", '{"a":null,"b":1}', {"include": ["/a"]}, None, None),
    ("selected values are canonical: 1.0e3 is 1000", '{"amount":1.0e3,"note":"x"}',
     {"include": ["/amount"]}, None, None),
    ("escapes: ~1 is / and ~0 is ~", '{"a/b":1,"m~n":2,"a":{"b":3},"m":4}',
     {"include": ["/a~1b", "/m~0n"]}, None, None),
    ("escapes: ~01 is the member ~1, not /", '{"~1":1,"/":2}', {"include": ["/~01"]}, None, None),
    ("the pointer / is the member named by the empty string", '{"":1,"a":2}', {"include": ["/"]}, None, None),
    ("a pointer in both lists: excluded", PAYMENT,
     {"include": ["/amount", "/note"], "exclude": ["/note"]}, None, None),
    # --- headers (HTTP middlewares) ---------------------------------------------------
    ("headers: names in any case, repeats joined in arrival order", PAYMENT,
     {"include": ["/amount"], "headers": ["X-Tenant", "accept-language"]},
     [["x-tenant", "t1"], ["Accept-Language", "en"], ["X-Other", "o"], ["ACCEPT-LANGUAGE", "de"]], None),
    ("headers: a missing header is omitted", PAYMENT,
     {"headers": ["X-Missing", "X-Tenant"]}, [["X-Tenant", "t1"]], None),
    ("headers: none present", PAYMENT, {"headers": ["X-Missing"]}, [], None),
    ("headers only: a body that is not an object is kept whole", "[1, 2]",
     {"headers": ["X-Tenant"]}, [["X-Tenant", "t1"]], None),
    ("headers: a header value is text as given", '{}',
     {"headers": ["X-Amount"]}, [["X-Amount", "1.0"]], None),
    # --- refused selectors --------------------------------------------------------------
    ("refused: the whole-document pointer in include", PAYMENT, {"include": [""]}, None, "selector"),
    ("refused: the whole-document pointer in exclude", PAYMENT, {"exclude": [""]}, None, "selector"),
    ("refused: a pointer not starting with /", PAYMENT, {"include": ["amount"]}, None, "selector"),
    ("refused: ~ followed by neither 0 nor 1", PAYMENT, {"include": ["/a~2b"]}, None, "selector"),
    ("refused: ~ at the end of a pointer", PAYMENT, {"exclude": ["/a~"]}, None, "selector"),
    ("refused: a duplicate include pointer", PAYMENT, {"include": ["/amount", "/amount"]}, None, "selector"),
    ("refused: a duplicate exclude pointer", PAYMENT, {"exclude": ["/note", "/note"]}, None, "selector"),
    ("refused: an empty header name", PAYMENT, {"headers": [""]}, [], "selector"),
    ("refused: a header name that is not a token", PAYMENT, {"headers": ["X Tenant"]}, [], "selector"),
    ("refused: a header name with a colon", PAYMENT, {"headers": ["x-tenant:"]}, [], "selector"),
    ("refused: duplicate header names, in any case", PAYMENT,
     {"headers": ["X-Tenant", "x-tenant"]}, [], "selector"),
    # --- refused bodies -----------------------------------------------------------------
    ("refused: include with an array body", "[1, 2]", {"include": ["/0"]}, None, "request"),
    ("refused: exclude with a string body", '"text"', {"exclude": ["/a"]}, None, "request"),
    ("refused: include with a null body", "null", {"include": ["/a"]}, None, "request"),
    ("refused: include with headers and a number body", "5",
     {"include": ["/a"], "headers": ["X-Tenant"]}, [], "request"),
    ("refused: a body that is not I-JSON, even outside the selection",
     '{"amount":1,"big":9007199254740993}', {"include": ["/amount"]}, None, "request"),
    ("refused: a body that is not JSON", "amount=1", {"include": ["/amount"]}, None, "request"),
    ("refused: headers with a body that is not JSON", "amount=1", {"headers": ["X-Tenant"]}, [], "request"),
]


def tokens(pointer):
    """The reference tokens of an RFC 6901 pointer; Refused for the pointers a
    selector may not hold."""
    if pointer == "":
        raise Refused("the pointer \"\" (the whole document) cannot be included or excluded")
    if not pointer.startswith("/"):
        raise Refused(f"pointer {pointer!r} does not start with /")
    out = []
    for raw in pointer[1:].split("/"):
        if re.search(r"~(?![01])", raw):
            raise Refused(f"pointer {pointer!r}: ~ must be followed by 0 or 1")
        out.append(raw.replace("~1", "/").replace("~0", "~"))
    return out


def check_selector(selector):
    for field in ("include", "exclude"):
        pointers = selector.get(field, [])
        for pointer in pointers:
            tokens(pointer)
        if len(set(pointers)) != len(pointers):
            raise Refused(f"{field} names a pointer twice")
    names = selector.get("headers", [])
    for name in names:
        if not TOKEN.match(name):
            raise Refused(f"header name {name!r} is not a token")
    if len({name.lower() for name in names}) != len(names):
        raise Refused("headers names a header twice")


def resolve(document, path):
    """The parent object and member name at path, or None when the path goes through
    something that is not an object or ends at an absent member."""
    parent = document
    for token in path[:-1]:
        if not isinstance(parent, dict) or token not in parent:
            return None
        parent = parent[token]
    if not isinstance(parent, dict) or path[-1] not in parent:
        return None
    return parent, path[-1]


def select(selector, body, headers):
    try:
        document = parse_i_json(body)
    except Refused as error:
        raise Refused("the body is not I-JSON (docs/api.md, \"Fingerprints\")") from error
    include = [tokens(pointer) for pointer in selector.get("include", [])]
    exclude = [tokens(pointer) for pointer in selector.get("exclude", [])]
    if include or exclude:
        if not isinstance(document, dict):
            raise Refused("include and exclude need a body that is a JSON object")
    if include:
        selected = {}
        for path in include:
            found = resolve(document, path)
            if found is None:
                continue
            parent, name = found
            target = selected
            for token in path[:-1]:
                target = target.setdefault(token, {})
            target[name] = copy.deepcopy(parent[name])
        document = selected
    for path in exclude:
        found = resolve(document, path)
        if found is not None:
            parent, name = found
            del parent[name]
    names = selector.get("headers", [])
    if not names:
        return document
    picked = {}
    for wanted in names:
        values = [value for name, value in headers if name.lower() == wanted.lower()]
        if values:
            picked[wanted.lower()] = ", ".join(values)
    return {"body": document, "headers": picked}


def vector(name, body, selector, headers, refused_at):
    entry = {"name": name, "body": body, "selector": selector}
    if headers is not None:
        entry["headers"] = headers
    actual = "selector"
    try:
        check_selector(selector)
        actual = "request"
        canonical = jcs(select(selector, body, headers or []))
    except Refused as error:
        if refused_at != actual:
            raise SystemExit(f"{name}: refused at {actual} ({error}) but listed as {refused_at}")
        entry["refused"] = str(error)
        entry["refused_at"] = actual
        return entry
    if refused_at is not None:
        raise SystemExit(f"{name}: accepted by this checker but listed as refused at {refused_at}")
    entry["canonical"] = canonical
    entry["fingerprint"] = fingerprint("json", canonical.encode("utf-8"))
    return entry


def document():
    return {
        "description": "Request selector test vectors (docs/api.md, \"Request selectors\"): the "
        "document a selector picks from a JSON body (and request headers), canonicalized as "
        "RFC 8785, and its idem.v1 json-mode fingerprint. Generated and checked by "
        "testdata/selectors.py.",
        "fields": {
            "name": "what the vector shows",
            "body": "the request body, JSON text",
            "selector": "include and exclude (JSON Pointers, RFC 6901) and headers (names); "
            "an absent or empty list is not given",
            "headers": "the request's headers as [name, value] pairs in arrival order (middlewares)",
            "canonical": "the RFC 8785 text of the selected document that is hashed (UTF-8)",
            "fingerprint": "lowercase hex of the json-mode fingerprint of canonical",
            "refused": "instead of canonical and fingerprint: why the selector or the body is refused",
            "refused_at": "selector: refused when the selector is built; request: refused when "
            "applied to this body (a middleware answers 400, execute-once raises invalid-argument)",
        },
        "vectors": [vector(*entry) for entry in VECTORS],
    }


def main():
    return check_or_write(FILE, document(), len(VECTORS), "selectors.py")


if __name__ == "__main__":
    sys.exit(main())
