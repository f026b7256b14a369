"""A small evaluator of exactly the PromQL that deploy/base/prometheus-rules.yaml
uses, and of alerting rules with ``for:``, over recorded series (promtool is
not available offline). Its own tests below pin each operator to Prometheus'
semantics; test_prometheus_rules.py runs the shipped rules through it.

Understood: number literals; instant selectors ``name{label="v", label!="v"}``
(the newest sample of each series at most five minutes old, absent once a
scrape no longer has it, as Prometheus' staleness markers make it); ``time()``;
``+ - * /`` (scalars and vectors, one-to-one matching, the metric name
dropped); comparisons ``== != < > <= >=`` (filters: the left sample kept where
true); ``and`` / ``unless`` with optional ``on(...)``; parentheses. Anything
else is a syntax error, so a rule beyond the subset fails its test."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

LOOKBACK = 300.0
Labels = frozenset[tuple[str, str]]
Vector = dict[Labels, float]
Value = float | Vector

TOKEN = re.compile(
    r"""\s*(?:
      (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
    | (?P<string>"(?:[^"\\]|\\.)*")
    | (?P<op>==|!=|<=|>=|=~|!~|[-+*/<>=(){},])
    | (?P<name>[A-Za-z_:][A-Za-z0-9_:]*)
    )""",
    re.VERBOSE,
)
COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
    "<=": operator.le,
    ">=": operator.ge,
}
ARITHMETIC: dict[str, Callable[[float, float], float]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": lambda a, b: a / b if b else (float("nan") if a == 0 else float("inf") * a),
}


class PromQLError(Exception):
    pass


def labels(**pairs: str) -> Labels:
    return frozenset(pairs.items())


def without_name(key: Labels) -> Labels:
    return frozenset((k, v) for k, v in key if k != "__name__")


@dataclass
class Scrapes:
    """Recorded series as Prometheus would have scraped them: at each time,
    every sample the target exposed (``{labels incl. __name__: value}``)."""

    at: list[tuple[float, Vector]] = field(default_factory=list)

    def add(self, time: float, samples: Vector) -> None:
        self.at.append((time, dict(samples)))
        self.at.sort(key=lambda pair: pair[0])

    def instant(self, time: float) -> Vector:
        """What an instant selector sees at ``time``: the newest scrape within
        the lookback; a series it lacks went stale."""
        newest: Vector | None = None
        for moment, samples in self.at:
            if moment > time:
                break
            newest = samples if time - moment <= LOOKBACK else None
        return dict(newest or {})


def tokens(text: str) -> list[tuple[str, str]]:
    found, position = [], 0
    text = text.strip()
    while position < len(text):
        match = TOKEN.match(text, position)
        if not match or match.end() == position:
            raise PromQLError(f"cannot read {text[position:]!r}")
        kind = match.lastgroup or ""
        found.append((kind, match.group(kind)))
        position = match.end()
    return found


class Parser:
    """Recursive descent; each method returns a function of (scrapes, time)."""

    def __init__(self, text: str) -> None:
        self.items = tokens(text)
        self.index = 0

    def peek(self) -> str | None:
        return self.items[self.index][1] if self.index < len(self.items) else None

    def take(self, expected: str | None = None) -> tuple[str, str]:
        if self.index >= len(self.items):
            raise PromQLError(f"expected {expected or 'more'}, found the end")
        item = self.items[self.index]
        if expected is not None and item[1] != expected:
            raise PromQLError(f"expected {expected!r}, found {item[1]!r}")
        self.index += 1
        return item

    def parse(self) -> Callable[[Scrapes, float], Value]:
        expr = self.set_ops()
        if self.peek() is not None:
            raise PromQLError(f"unexpected {self.peek()!r}")
        return expr

    def set_ops(self) -> Callable[[Scrapes, float], Value]:
        left = self.comparison()
        while self.peek() in ("and", "unless"):
            op = self.take()[1]
            on = self.on_labels()
            right = self.comparison()
            left = _set_op(op, on, left, right)
        return left

    def on_labels(self) -> tuple[str, ...] | None:
        if self.peek() != "on":
            if self.peek() in ("ignoring", "group_left", "group_right", "bool"):
                raise PromQLError(f"{self.peek()} is outside the subset")
            return None
        self.take("on")
        self.take("(")
        names = []
        while self.peek() != ")":
            names.append(self.take()[1])
            if self.peek() == ",":
                self.take(",")
        self.take(")")
        return tuple(names)

    def comparison(self) -> Callable[[Scrapes, float], Value]:
        left = self.additive()
        while self.peek() in COMPARISONS:
            op = self.take()[1]
            on = self.on_labels()
            right = self.additive()
            left = _binary(op, on, left, right)
        return left

    def additive(self) -> Callable[[Scrapes, float], Value]:
        left = self.multiplicative()
        while self.peek() in ("+", "-"):
            op = self.take()[1]
            on = self.on_labels()
            left = _binary(op, on, left, self.multiplicative())
        return left

    def multiplicative(self) -> Callable[[Scrapes, float], Value]:
        left = self.primary()
        while self.peek() in ("*", "/"):
            op = self.take()[1]
            on = self.on_labels()
            left = _binary(op, on, left, self.primary())
        return left

    def primary(self) -> Callable[[Scrapes, float], Value]:
        kind, text = self.take()
        if text == "(":
            inner = self.set_ops()
            self.take(")")
            return inner
        if kind == "number":
            number = float(text)
            return lambda scrapes, time: number
        if kind != "name":
            raise PromQLError(f"unexpected {text!r}")
        if text == "time" and self.peek() == "(":
            self.take("(")
            self.take(")")
            return lambda scrapes, time: time
        if self.peek() == "(":
            raise PromQLError(f"function {text}() is outside the subset")
        matchers = self.matchers()
        if self.peek() == "[":
            raise PromQLError("range selectors are outside the subset")
        name = text

        def select(scrapes: Scrapes, time: float) -> Vector:
            found = {}
            for key, value in scrapes.instant(time).items():
                held = dict(key)
                if held.get("__name__") != name:
                    continue
                if all((held.get(k, "") == v) == (op == "=") for k, op, v in matchers):
                    found[key] = value
            return found

        return select

    def matchers(self) -> list[tuple[str, str, str]]:
        if self.peek() != "{":
            return []
        self.take("{")
        found = []
        while self.peek() != "}":
            name = self.take()[1]
            op = self.take()[1]
            if op not in ("=", "!="):
                raise PromQLError(f"matcher {op} is outside the subset")
            kind, text = self.take()
            if kind != "string":
                raise PromQLError(f"a label value must be quoted: {text}")
            found.append((name, op, text[1:-1]))
            if self.peek() == ",":
                self.take(",")
        self.take("}")
        return found


def _signature(key: Labels, on: tuple[str, ...] | None) -> Labels:
    if on is None:
        return without_name(key)
    return frozenset((k, v) for k, v in key if k in on)


def _set_op(
    op: str,
    on: tuple[str, ...] | None,
    left: Callable[[Scrapes, float], Value],
    right: Callable[[Scrapes, float], Value],
) -> Callable[[Scrapes, float], Value]:
    def run(scrapes: Scrapes, time: float) -> Value:
        lhs, rhs = left(scrapes, time), right(scrapes, time)
        if not isinstance(lhs, dict) or not isinstance(rhs, dict):
            raise PromQLError(f"{op} takes two vectors")
        present = {_signature(key, on) for key in rhs}
        keep = op == "and"
        return {k: v for k, v in lhs.items() if (_signature(k, on) in present) == keep}

    return run


def _binary(
    op: str,
    on: tuple[str, ...] | None,
    left: Callable[[Scrapes, float], Value],
    right: Callable[[Scrapes, float], Value],
) -> Callable[[Scrapes, float], Value]:
    compare = COMPARISONS.get(op)
    arithmetic = ARITHMETIC.get(op)

    def pair(a: float, b: float) -> float | None:
        if compare is not None:
            return a if compare(a, b) else None
        assert arithmetic is not None
        return arithmetic(a, b)

    def run(scrapes: Scrapes, time: float) -> Value:
        lhs, rhs = left(scrapes, time), right(scrapes, time)
        if not isinstance(lhs, dict) and not isinstance(rhs, dict):
            if compare is not None:
                raise PromQLError("comparing two scalars needs bool, outside the subset")
            assert arithmetic is not None
            return arithmetic(lhs, rhs)
        result: Vector = {}
        if isinstance(lhs, dict) and not isinstance(rhs, dict):
            for key, value in lhs.items():
                out = pair(value, rhs)
                if out is not None:
                    result[key if compare else without_name(key)] = out
            return result
        if not isinstance(lhs, dict) and isinstance(rhs, dict):
            for key, value in rhs.items():
                # A filter keeps the vector's sample; arithmetic computes with it.
                if compare is not None:
                    if compare(lhs, value):
                        result[key] = value
                else:
                    out = pair(lhs, value)
                    assert out is not None
                    result[without_name(key)] = out
            return result
        assert isinstance(lhs, dict) and isinstance(rhs, dict)
        by_signature: dict[Labels, float] = {}
        for key, value in rhs.items():
            signature = _signature(key, on)
            if signature in by_signature:
                raise PromQLError(f"many-to-one match on the right for {sorted(signature)}")
            by_signature[signature] = value
        seen: set[Labels] = set()
        for key, value in lhs.items():
            signature = _signature(key, on)
            if signature in seen:
                raise PromQLError(f"many-to-one match on the left for {sorted(signature)}")
            seen.add(signature)
            if signature not in by_signature:
                continue
            out = pair(value, by_signature[signature])
            if out is None:
                continue
            if compare is not None:
                result[key] = out
            else:
                result[signature if on is not None else without_name(key)] = out
        return result

    return run


def compile_expr(text: str) -> Callable[[Scrapes, float], Value]:
    return Parser(text).parse()


# --------------------------------------------------------------------- rules

DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def seconds_of(text: str) -> float:
    match = DURATION.match(str(text))
    if not text or not match or not any(match.groups()):
        raise PromQLError(f"not a duration: {text!r}")
    hours, minutes, secs = (int(g or 0) for g in match.groups())
    return hours * 3600 + minutes * 60 + secs


@dataclass
class Rule:
    alert: str
    expr: Callable[[Scrapes, float], Value]
    source: str
    hold: float
    labels: dict[str, str]
    annotations: dict[str, str]


def load_rules(text: str) -> list[Rule]:
    """The alerting rules of a Prometheus rule file, each expression compiled."""
    document = yaml.safe_load(text)
    if not isinstance(document, dict) or set(document) != {"groups"}:
        raise PromQLError("a rule file holds exactly one key, groups")
    rules = []
    names = set()
    for group in document["groups"]:
        if not group.get("name") or group["name"] in names:
            raise PromQLError(f"a group needs a unique name: {group.get('name')!r}")
        names.add(group["name"])
        for entry in group["rules"]:
            unknown = set(entry) - {"alert", "expr", "for", "labels", "annotations"}
            if unknown or "alert" not in entry or "expr" not in entry:
                raise PromQLError(f"not an alerting rule: {entry}")
            rules.append(
                Rule(
                    alert=entry["alert"],
                    expr=compile_expr(entry["expr"]),
                    source=entry["expr"],
                    hold=seconds_of(entry.get("for", "0s")) if "for" in entry else 0.0,
                    labels={str(k): str(v) for k, v in (entry.get("labels") or {}).items()},
                    annotations={
                        str(k): str(v) for k, v in (entry.get("annotations") or {}).items()
                    },
                )
            )
    return rules


@dataclass(frozen=True)
class Alert:
    alert: str
    labels: Labels
    state: str  # pending or firing
    value: float
    active_since: float


def evaluate_rules(
    rules: Iterable[Rule], scrapes: Scrapes, times: Iterable[float]
) -> dict[float, list[Alert]]:
    """Alerts at each evaluation time, as Prometheus' rule manager keeps them:
    an alert is pending from the first evaluation its expression returns it,
    firing once it has been returned for ``for``, gone (resolved) as soon as
    an evaluation does not return it."""
    rules = list(rules)
    active: dict[tuple[str, Labels], float] = {}
    timeline: dict[float, list[Alert]] = {}
    for time in times:
        now_active: dict[tuple[str, Labels], float] = {}
        alerts = []
        for rule in rules:
            value = rule.expr(scrapes, time)
            vector = value if isinstance(value, dict) else {frozenset(): value}
            for key, sample in vector.items():
                alert_labels = frozenset(
                    {**dict(without_name(key)), **rule.labels, "alertname": rule.alert}.items()
                )
                ident = (rule.alert, alert_labels)
                since = active.get(ident, time)
                now_active[ident] = since
                state = "firing" if time - since >= rule.hold else "pending"
                alerts.append(Alert(rule.alert, alert_labels, state, sample, since))
        active = now_active
        timeline[time] = sorted(alerts, key=lambda a: (a.alert, sorted(a.labels)))
    return timeline


def firing(alerts: list[Alert], name: str) -> dict[str, str]:
    """{team label: state} of one alert's instances."""
    return {dict(a.labels).get("team", ""): a.state for a in alerts if a.alert == name}


def samples(values: Mapping[tuple[str, tuple[tuple[str, str], ...]], float]) -> Vector:
    """{(name, ((label, value), ...)): value} → a scrape's samples."""
    return {frozenset({("__name__", name), *pairs}): v for (name, pairs), v in values.items()}


# --------------------------------------------------------------------- tests of the evaluator


def _scrape(**series: Any) -> Scrapes:
    recorded = Scrapes()
    recorded.add(
        0.0,
        samples(
            {
                ("ratio", (("team", "a"), ("window", "1h"))): 0.2,
                ("ratio", (("team", "b"), ("window", "1h"))): 0.9,
                ("ratio", (("team", "a"), ("window", "24h"))): 0.4,
                ("below", (("team", "a"), ("window", "1h"))): 0.5,
                ("below", (("team", "b"), ("window", "1h"))): 0.5,
                ("waiting", (("team", "a"),)): 8.0,
                ("waiting", (("team", "b"),)): 0.0,
                ("stamp", ()): 100.0,
                **series,
            }
        ),
    )
    return recorded


def _teams(value: Value) -> dict[str, float]:
    assert isinstance(value, dict)
    return {dict(k).get("team", ""): v for k, v in value.items()}


def test_selectors_match_name_and_labels() -> None:
    recorded = _scrape()
    assert _teams(compile_expr('ratio{window="1h"}')(recorded, 10)) == {"a": 0.2, "b": 0.9}
    assert _teams(compile_expr('ratio{window!="1h"}')(recorded, 10)) == {"a": 0.4}
    assert _teams(compile_expr('ratio{team="b", window="1h"}')(recorded, 10)) == {"b": 0.9}


def test_a_series_goes_stale_when_a_scrape_lacks_it_or_after_five_minutes() -> None:
    recorded = _scrape()
    recorded.add(60.0, samples({("ratio", (("team", "b"), ("window", "1h"))): 0.1}))
    assert _teams(compile_expr('ratio{window="1h"}')(recorded, 61)) == {"b": 0.1}
    assert compile_expr("ratio")(recorded, 60 + LOOKBACK + 1) == {}
    assert compile_expr("ratio")(recorded, -1) == {}


def test_comparisons_filter_and_vectors_match_one_to_one_on_all_labels() -> None:
    recorded = _scrape()
    assert _teams(compile_expr("waiting > 0")(recorded, 0)) == {"a": 8.0}
    assert _teams(compile_expr("0 < waiting")(recorded, 0)) == {"a": 8.0}
    # ratio{24h} has no partner in below: dropped; the left value is kept.
    assert _teams(compile_expr("ratio < below")(recorded, 0)) == {"a": 0.2}
    assert _teams(compile_expr("ratio >= below")(recorded, 0)) == {"b": 0.9}
    with pytest.raises(PromQLError, match="many-to-one"):
        compile_expr("ratio < on(team) below")(recorded, 0)


def test_and_unless_keep_the_left_where_the_right_has_a_match_on_the_labels_named() -> None:
    recorded = _scrape()
    expr = 'ratio{window="1h"} and on(team) waiting > 0'
    assert _teams(compile_expr(expr)(recorded, 0)) == {"a": 0.2}
    unless = 'ratio{window="1h"} unless on(team) waiting > 0'
    assert _teams(compile_expr(unless)(recorded, 0)) == {"b": 0.9}
    # Without on(), every label must match: waiting has no window label.
    assert compile_expr('ratio{window="1h"} and waiting')(recorded, 0) == {}


def test_arithmetic_precedence_time_and_dropped_names() -> None:
    recorded = _scrape()
    recorded.add(650.0, samples({("stamp", ()): 100.0}))
    value = compile_expr("time() - stamp > 600")(recorded, 701)
    assert value == {frozenset(): 601.0}
    assert compile_expr("time() - stamp > 600")(recorded, 700) == {}
    assert compile_expr("1 + 2 * 3")(recorded, 0) == 7.0
    recorded = _scrape()
    assert compile_expr("(1 + 2) * 3")(recorded, 0) == 9.0
    assert _teams(compile_expr("waiting / 2")(recorded, 0)) == {"a": 4.0, "b": 0.0}


@pytest.mark.parametrize(
    "expr",
    [
        "rate(ratio[5m])",
        "ratio[5m]",
        "sum(ratio)",
        'ratio{team=~"a"}',
        "ratio < bool 1",
        "ratio ^ 2",
    ],
)
def test_anything_outside_the_subset_is_refused(expr: str) -> None:
    with pytest.raises(PromQLError):
        compile_expr(expr)(_scrape(), 0)


def test_for_keeps_an_alert_pending_then_firing_and_resolves_it_when_it_stops() -> None:
    (rule,) = load_rules(
        "groups:\n- name: g\n  rules:\n  - alert: Low\n    expr: waiting > 4\n    for: 2m\n"
    )
    recorded = Scrapes()
    for time, value in ((0, 8), (60, 8), (120, 8), (180, 8), (240, 0), (300, 8)):
        recorded.add(time, samples({("waiting", (("team", "a"),)): float(value)}))
    timeline = evaluate_rules([rule], recorded, [0, 60, 120, 180, 240, 300])
    states = [firing(timeline[t], "Low").get("a") for t in (0, 60, 120, 180, 240, 300)]
    assert states == ["pending", "pending", "firing", "firing", None, "pending"]


def test_a_rule_file_that_is_not_alerting_rules_is_refused() -> None:
    for text in (
        "rules: []",
        "groups:\n- name: g\n  rules:\n  - record: x\n    expr: y\n",
        "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: y\n    for: soon\n",
    ):
        with pytest.raises(PromQLError):
            load_rules(text)
