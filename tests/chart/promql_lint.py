"""A small PromQL reader for the monitoring tests: enough to find every series selector in
an expression, with its label matchers, its range and the calls around it.

Not a full parser (no operator precedence, no type checking), but it refuses what it does
not understand: unknown functions, stray characters, unbalanced brackets, malformed label
matchers. Grafana's `$__rate_interval`-style variables are accepted inside ranges and
strings only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

AGGREGATORS = {
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
    "bottomk", "topk", "quantile", "limitk", "limit_ratio",
}
FUNCTIONS = {
    "abs", "absent", "absent_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh",
    "avg_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min", "cos", "cosh",
    "count_over_time", "day_of_month", "day_of_week", "day_of_year", "days_in_month", "deg",
    "delta", "deriv", "double_exponential_smoothing", "exp", "floor", "histogram_avg",
    "histogram_count", "histogram_fraction", "histogram_quantile", "histogram_stddev",
    "histogram_stdvar", "histogram_sum", "holt_winters", "hour", "idelta", "increase",
    "irate", "label_join", "label_replace", "last_over_time", "ln", "log10", "log2",
    "mad_over_time", "max_over_time", "min_over_time", "minute", "month", "pi",
    "predict_linear", "present_over_time", "quantile_over_time", "rad", "rate", "resets",
    "round", "scalar", "sgn", "sin", "sinh", "sort", "sort_by_label", "sort_by_label_desc",
    "sort_desc", "sqrt", "stddev_over_time", "stdvar_over_time", "sum_over_time", "tan",
    "tanh", "time", "timestamp", "vector", "year",
}
LABEL_LIST_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
OPERATOR_KEYWORDS = {"and", "or", "unless", "bool", "offset", "atan2"}
MATCH_OPS = {"=", "!=", "=~", "!~"}

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<range>\[[^\[\]]*\])
  | (?P<duration>\d+(?:ms|s|m|h|d|w|y)(?:\d+(?:ms|s|m|h|d|w|y))*(?![A-Za-z0-9_]))
  | (?P<number>(?:0x[0-9a-fA-F]+|\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)(?![A-Za-z_]))
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<op>=~|!~|!=|==|>=|<=|[-+*/%^<>=,(){}@])
""", re.VERBOSE)


class PromQLError(ValueError):
    pass


@dataclass
class Call:
    """A function or aggregation around a selector; `labels` is its by/without list."""

    name: str
    grouping: str | None = None
    labels: tuple[str, ...] = ()

    @property
    def is_aggregation(self) -> bool:
        return self.name in AGGREGATORS


@dataclass
class Selector:
    metric: str
    matchers: list[tuple[str, str, str]] = field(default_factory=list)
    has_range: bool = False
    # Calls around the selector, innermost first.
    calls: list[Call] = field(default_factory=list)

    def matcher(self, label: str) -> tuple[str, str] | None:
        for name, op, value in self.matchers:
            if name == label:
                return op, value
        return None

    def first_aggregation(self) -> Call | None:
        return next((call for call in self.calls if call.is_aggregation), None)


def _tokens(expr: str) -> list[tuple[str, str]]:
    tokens, pos = [], 0
    while pos < len(expr):
        match = _TOKEN.match(expr, pos)
        if not match:
            raise PromQLError(f"unexpected {expr[pos:pos + 20]!r} at {pos} in {expr!r}")
        pos = match.end()
        if match.lastgroup != "ws":
            tokens.append((match.lastgroup, match.group()))
    return tokens


def _unquote(token: str) -> str:
    body = token[1:-1]
    return body if token[0] == "`" else re.sub(r"\\(.)", r"\1", body)


def selectors(expr: str) -> list[Selector]:
    """Every series selector of a PromQL expression, in order."""
    tokens = _tokens(expr)
    found: list[Selector] = []
    # Open brackets: a Call for a function/aggregation, "labels" for a by/on list, None for
    # plain grouping parentheses.
    stack: list[Call | str | None] = []
    pending_call: Call | None = None
    pending_grouping: str | None = None
    last_closed: Call | None = None
    i = 0

    def peek(offset: int = 1) -> tuple[str, str]:
        return tokens[i + offset] if i + offset < len(tokens) else ("end", "")

    while i < len(tokens):
        kind, text = tokens[i]
        if kind == "ident":
            lower = text.lower()
            if text in LABEL_LIST_KEYWORDS:
                pending_grouping = text
                if peek()[1] != "(" and text not in ("group_left", "group_right"):
                    raise PromQLError(f"{text} needs a label list in {expr!r}")
                if text in ("by", "without") and pending_call is None and last_closed is not None \
                        and last_closed.is_aggregation and last_closed.grouping is None:
                    # Postfix form: sum(...) by (labels).
                    pending_call = None
                    last_closed.grouping = text
                    stack_target = last_closed
                else:
                    stack_target = pending_call
                if peek()[1] == "(":
                    i += 2
                    labels = []
                    while peek(0)[1] != ")":
                        label_kind, label = peek(0)
                        if label_kind != "ident":
                            if label == ",":
                                i += 1
                                continue
                            raise PromQLError(f"bad label list after {text} in {expr!r}")
                        labels.append(label)
                        i += 1
                    if text in ("by", "without") and stack_target is not None:
                        stack_target.grouping = text
                        stack_target.labels = tuple(labels)
                pending_grouping = None
                i += 1
                continue
            if lower in OPERATOR_KEYWORDS or lower in ("inf", "nan"):
                i += 1
                continue
            if text in AGGREGATORS and (peek()[1] == "(" or peek()[1] in ("by", "without")):
                pending_call = Call(text)
                i += 1
                continue
            if peek()[1] == "(":
                if text not in FUNCTIONS:
                    raise PromQLError(f"unknown function {text}() in {expr!r}")
                pending_call = Call(text)
                i += 1
                continue
            # A metric name.
            calls = [frame for frame in reversed(stack) if isinstance(frame, Call)]
            selector = Selector(metric=text, calls=calls)
            i += 1
            if peek(0)[1] == "{":
                i += 1
                while peek(0)[1] != "}":
                    (label_kind, label), (_, op), (value_kind, value) = peek(0), peek(1), peek(2)
                    if label_kind != "ident" or op not in MATCH_OPS or value_kind != "string":
                        raise PromQLError(f"bad label matcher in {expr!r}")
                    selector.matchers.append((label, op, _unquote(value)))
                    i += 3
                    if peek(0)[1] == ",":
                        i += 1
                    elif peek(0)[1] != "}":
                        raise PromQLError(f"expected , or }} in {expr!r}")
                i += 1
            if peek(0)[0] == "range":
                selector.has_range = True
            found.append(selector)
            last_closed = None
            continue
        if text == "(":
            stack.append(pending_call)
            pending_call = None
        elif text == ")":
            if not stack:
                raise PromQLError(f"unbalanced ) in {expr!r}")
            frame = stack.pop()
            last_closed = frame if isinstance(frame, Call) else None
            i += 1
            continue
        elif text in ("{", "}"):
            raise PromQLError(f"stray {text} in {expr!r}")
        elif pending_call is not None:
            raise PromQLError(f"{pending_call.name} without arguments in {expr!r}")
        last_closed = None
        i += 1
    if stack:
        raise PromQLError(f"unbalanced ( in {expr!r}")
    if pending_call is not None or pending_grouping is not None:
        raise PromQLError(f"dangling {pending_call or pending_grouping} in {expr!r}")
    return found
