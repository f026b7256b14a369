"""Kubernetes label selectors, as the API server evaluates them: what a
ClusterQueue's namespaceSelector admits. Pure: no Django, no client."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` match: ``None`` selects nothing (Kueue's default for
    a ClusterQueue's namespaceSelector), ``{}`` everything; matchLabels and
    every matchExpression (In, NotIn, Exists, DoesNotExist) must hold."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key", ""), expression.get("operator", "")
        values = expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False  # the API server refuses these; select nothing
    return True
