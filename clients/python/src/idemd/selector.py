"""Request selectors: the fields that define a request, so that a retry which changes
anything else (a trace id, a timestamp) replays instead of conflicting.

The syntax and the rules are docs/api.md, "Request selectors", the same in every
idemd client, and the shared vectors are testdata/selectors.json:

* ``include``: JSON Pointers (RFC 6901) to the members that define the request;
* ``exclude``: JSON Pointers to members that do not;
* ``headers``: request header names (the HTTP middlewares only).

The fingerprint is the json-mode fingerprint of the selected document. A selector
that cannot be right (the whole-document pointer ``""``, a pointer not starting with
``/``, a bad ``~`` escape, a duplicate, a header name that is not a token) raises
:class:`SelectorError` when it is made; a body the selector cannot apply to (not
I-JSON; not a JSON object while ``include`` or ``exclude`` is given) raises
:class:`~idemd.errors.InvalidArgumentError` when it is applied, before any RPC.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from idemd.errors import FieldViolation, IdemError, InvalidArgumentError
from idemd.fingerprint import NotIJsonError, canonical_value, fingerprint_json, parse_i_json

__all__ = ["Selector", "SelectorError"]

#: A JSON body: its text, or a document a mapping or list stands for.
JsonBody = str | bytes | Mapping[str, Any] | list[Any]

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_ESCAPE = re.compile(r"~(?![01])")


class SelectorError(IdemError, ValueError):
    """A selector that cannot be right, refused when it is made."""


def _tokens(pointer: str) -> tuple[str, ...]:
    if pointer == "":
        raise SelectorError('the pointer "" (the whole document) cannot be included or excluded')
    if not pointer.startswith("/"):
        raise SelectorError(f"pointer {pointer!r} does not start with /")
    if _BAD_ESCAPE.search(pointer):
        raise SelectorError(f"pointer {pointer!r}: ~ must be followed by 0 or 1")
    return tuple(raw.replace("~1", "/").replace("~0", "~") for raw in pointer[1:].split("/"))


def _pointers(field: str, pointers: Iterable[str]) -> tuple[tuple[str, ...], ...]:
    listed = list(pointers)
    if any(not isinstance(pointer, str) for pointer in listed):
        raise SelectorError(f"{field} must be a list of str")
    if len(set(listed)) != len(listed):
        raise SelectorError(f"{field} names a pointer twice")
    return tuple(_tokens(pointer) for pointer in listed)


def _found(document: Any, path: Sequence[str]) -> tuple[dict[str, Any], str] | None:
    """The object holding the member at ``path`` and its name, or None when the path
    goes through something that is not an object or names an absent member."""
    parent = document
    for token in path[:-1]:
        if not isinstance(parent, dict) or token not in parent:
            return None
        parent = parent[token]
    if not isinstance(parent, dict) or path[-1] not in parent:
        return None
    return parent, path[-1]


def _refused(message: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        grpc.StatusCode.INVALID_ARGUMENT,
        message,
        reason="INVALID_REQUEST",
        violations=[FieldViolation("json_payload", message)],
    )


@dataclass(frozen=True, init=False)
class Selector:
    """The fields that define a request: ``include`` and ``exclude`` JSON Pointers,
    and for the HTTP middlewares ``headers``. An empty selector is the whole body."""

    include: tuple[str, ...]
    exclude: tuple[str, ...]
    headers: tuple[str, ...]

    def __init__(
        self, *, include: Iterable[str] = (), exclude: Iterable[str] = (), headers: Iterable[str] = ()
    ) -> None:
        for field, given in (("include", include), ("exclude", exclude), ("headers", headers)):
            if isinstance(given, (str, bytes)):
                raise SelectorError(f"{field} must be a list of str, not one str")
        include, exclude, headers = tuple(include), tuple(exclude), tuple(headers)
        _pointers("include", include)
        _pointers("exclude", exclude)
        for name in headers:
            if not isinstance(name, str) or not _TOKEN.fullmatch(name):
                raise SelectorError(f"header name {name!r} is not a token")
        if len({name.lower() for name in headers}) != len(headers):
            raise SelectorError("headers names a header twice")
        object.__setattr__(self, "include", include)
        object.__setattr__(self, "exclude", exclude)
        object.__setattr__(self, "headers", headers)

    @property
    def empty(self) -> bool:
        """No field is selected: the request is the whole body, as without a selector."""
        return not (self.include or self.exclude or self.headers)

    def document(self, body: JsonBody, headers: Iterable[tuple[str, str]] = ()) -> Any:
        """The selected document of a JSON ``body`` (JSON text, or a mapping or list
        serialised as ``execute_once`` serialises a payload) and the request's
        ``headers`` ((name, value) pairs in arrival order, names in any case)."""
        if not isinstance(body, (str, bytes)):
            body = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
        try:
            document = parse_i_json(body)
        except NotIJsonError as error:
            raise _refused(f"the body is not I-JSON: {error}") from None
        include = _pointers("include", self.include)
        exclude = _pointers("exclude", self.exclude)
        if (include or exclude) and not isinstance(document, dict):
            raise _refused("include and exclude need a body that is a JSON object")
        if include:
            selected: dict[str, Any] = {}
            for path in include:
                found = _found(document, path)
                if found is None:
                    continue
                parent, name = found
                target = selected
                for token in path[:-1]:
                    target = target.setdefault(token, {})
                target[name] = copy.deepcopy(parent[name])
            document = selected
        for path in exclude:
            found = _found(document, path)
            if found is not None:
                del found[0][found[1]]
        if not self.headers:
            return document
        arrived = [(name.lower(), value) for name, value in headers]
        picked: dict[str, str] = {}
        for wanted in (name.lower() for name in self.headers):
            values = [value for name, value in arrived if name == wanted]
            if values:
                picked[wanted] = ", ".join(values)
        return {"body": document, "headers": picked}

    def canonical(self, body: JsonBody, headers: Iterable[tuple[str, str]] = ()) -> bytes:
        """The RFC 8785 form (UTF-8) of :meth:`document`: what is fingerprinted."""
        return canonical_value(self.document(body, headers))

    def fingerprint(self, body: JsonBody, headers: Iterable[tuple[str, str]] = ()) -> bytes:
        """The json-mode fingerprint of :meth:`document`: what the server computes for
        the selected document (its canonical form). During a migration window this is
        how a request's fingerprint under an earlier selector is computed, to be sent
        in ``previous_fingerprints``."""
        return fingerprint_json(self.canonical(body, headers))
