"""Label and field selectors for the loopback API-server double.

LIST, WATCH and DELETE-collection requests filter objects by ``labelSelector`` and
``fieldSelector``; this module parses both into a ``Matcher`` (a predicate on a stored
object) with Kubernetes' syntax and error messages. It is separate from the store because
parsing a selector needs nothing but the query string and the resource type.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tests.kube.apiserver_patches import get_path
from tests.kube.apiserver_resources import ApiError, Obj, ResourceType

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"[-A-Za-z0-9_.]*"
_SET_TERM = re.compile(rf"^({_KEY})\s+(in|notin)\s*\(([^()]*)\)$")
_EQ_TERM = re.compile(rf"^({_KEY})\s*(==|=|!=)\s*({_VALUE})$")
_EXISTS_TERM = re.compile(rf"^(!?)\s*({_KEY})$")
Matcher = Callable[[Obj], bool]


def _split_terms(selector: str) -> list[str]:
    terms, depth, start = [], 0, 0
    for i, char in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(selector[start:i])
            start = i + 1
    terms.append(selector[start:])
    return [term.strip() for term in terms]


def label_matcher(selector: str | None) -> Matcher:
    """``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``, ``k in (a,b)``, ``k notin (a,b)``, ANDed."""
    requirements: list[tuple[str, str, frozenset[str]]] = []  # key, operator, values
    for term in _split_terms(selector) if selector and selector.strip() else []:
        if m := _SET_TERM.match(term):
            values = frozenset(value.strip() for value in m[3].split(","))
            requirements.append((m[1], m[2], values))
        elif m := _EQ_TERM.match(term):
            requirements.append((m[1], "notin" if m[2] == "!=" else "in", frozenset([m[3]])))
        elif m := _EXISTS_TERM.match(term):
            requirements.append((m[2], "!" if m[1] else "exists", frozenset()))
        else:
            raise ApiError(400, f"unable to parse requirement: found '{term}', in {selector!r}")

    def matches(obj: Obj) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        for key, operator, values in requirements:
            if operator == "exists":
                ok = key in labels
            elif operator == "!":
                ok = key not in labels
            else:  # a missing label is "not in" any set, as in Kubernetes
                ok = (labels.get(key) in values) == (operator == "in")
            if not ok:
                return False
        return True

    return matches


def field_matcher(selector: str | None, rtype: ResourceType) -> Matcher:
    """``metadata.name``/``metadata.namespace`` (plus a few per-type fields) with ``=``/``!=``."""
    allowed = {"metadata.name", "metadata.namespace", *rtype.field_labels}
    tests: list[tuple[list[str], bool, str]] = []
    for term in _split_terms(selector) if selector and selector.strip() else []:
        m = re.match(r"^([A-Za-z.]+)\s*(==|=|!=)\s*(.*)$", term)
        if not m:
            raise ApiError(400, f"invalid selector: '{selector}'; can't understand '{term}'")
        if m[1] not in allowed:
            raise ApiError(400, f'field label not supported: "{m[1]}"')
        tests.append((m[1].split("."), m[2] == "!=", m[3]))

    def matches(obj: Obj) -> bool:
        for path, negate, value in tests:
            actual = get_path(obj, tuple(path))
            text = str(actual).lower() if isinstance(actual, bool) else str(actual or "")
            if (text == value) == negate:
                return False
        return True

    return matches


def query_matcher(query: dict[str, str], rtype: ResourceType) -> Matcher:
    """Both selectors of a request's query string (``labelSelector``, ``fieldSelector``)."""
    labels = label_matcher(query.get("labelSelector"))
    fields = field_matcher(query.get("fieldSelector"), rtype)
    return lambda obj: labels(obj) and fields(obj)
