"""The validation rules Kueue applies to policy objects, in plainer words.

Each rule mirrors what a kube-apiserver with Kueue's CRDs and webhooks would
refuse (the CRD's OpenAPI limits, its ``x-kubernetes-validations`` and Kueue's
validating webhooks), so that Berth refuses it first, at the field the admin
typed. Functions take plain values and return ``FieldError`` lists; they never
raise on bad input. Rule identifiers are stable: clients and tests match on them.
Resource groups and their quotas, the largest set, are in ``queues.quota_rules``.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from queues import names
from queues.errors import FieldError
from queues.quantity import QuantityError, parse_decimal, written_negative

# Kueue's CRD limits (kueue.x-k8s.io/v1beta2, v0.19).
MAX_NODE_LABELS = 8
MAX_NODE_TAINTS = 8
MAX_TOLERATIONS = 8
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MAX = 2**63 - 1
MAX_WEIGHT = Decimal(1_000_000)

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Equal", "Exists")


# --------------------------------------------------------------------------- names


def name_errors(field: str, value: str, *, kind: str = "subdomain") -> list[FieldError]:
    """``kind`` is ``label`` (≤63, no dots) or ``subdomain`` (≤253, dots allowed)."""
    check = names.dns_label_error if kind == "label" else names.dns_subdomain_error
    problem = check(value)
    return [FieldError(field, f"dns-1123-{kind}", problem)] if problem else []


# --------------------------------------------------------------------------- scalars


def priority_value_errors(field: str, value: Any) -> list[FieldError]:
    if isinstance(value, bool) or not isinstance(value, int):
        return [FieldError(field, "type", "must be a whole number")]
    if not INT32_MIN <= value <= INT32_MAX:
        return [
            FieldError(
                field,
                "int32-range",
                f"{value} is outside the 32-bit range Kubernetes uses for priorities "
                f"({INT32_MIN} to {INT32_MAX})",
            )
        ]
    return []


def parse_weight(field: str, value: Any) -> tuple[Decimal | None, list[FieldError]]:
    """A fair-sharing weight: a non-negative quantity (``1``, ``0.5``, ``2500m``)."""
    if value is None or value == "":
        return None, []
    try:
        weight = parse_decimal(value)
    except QuantityError as exc:
        return None, [FieldError(field, f"quantity-{exc.rule}", str(exc))]
    if weight < 0 or written_negative(value):
        return None, [FieldError(field, "non-negative", f"{value} is negative; use 0 or more")]
    if weight > MAX_WEIGHT:
        return None, [FieldError(field, "range", f"{value} is above {MAX_WEIGHT}")]
    if weight % Decimal("0.001") != 0:
        return None, [FieldError(field, "quantity-precision", f"{value} is finer than 0.001 (1m)")]
    return weight, []


def preemption_errors(
    *,
    reclaim_within_cohort: str,
    borrow_within_cohort_policy: str,
    max_priority_threshold: int | None,
) -> list[FieldError]:
    errors: list[FieldError] = []
    if reclaim_within_cohort == "Never" and borrow_within_cohort_policy != "Never":
        errors.append(
            FieldError(
                "borrow_within_cohort_policy",
                "borrow-needs-reclaim",
                f"{borrow_within_cohort_policy} needs reclaim_within_cohort other than Never: "
                "a queue that may not preempt in its cohort cannot preempt while borrowing "
                "either",
            )
        )
    if max_priority_threshold is not None:
        if borrow_within_cohort_policy == "Never":
            errors.append(
                FieldError(
                    "borrow_within_cohort_max_priority_threshold",
                    "threshold-needs-borrow-policy",
                    "only applies when borrow_within_cohort_policy is LowerPriority; clear it "
                    "or set the policy",
                )
            )
        errors.extend(
            priority_value_errors(
                "borrow_within_cohort_max_priority_threshold", max_priority_threshold
            )
        )
    return errors


def fungibility_errors(
    *, when_can_borrow: str, when_can_preempt: str, preference: str
) -> list[FieldError]:
    if preference and not (when_can_borrow == when_can_preempt == "TryNextFlavor"):
        return [
            FieldError(
                "flavor_fungibility_preference",
                "preference-needs-try-next-flavor",
                "can only be set when both when_can_borrow and when_can_preempt are TryNextFlavor",
            )
        ]
    return []


# --------------------------------------------------------------------------- flavors


def node_label_errors(field: str, labels: Any) -> list[FieldError]:
    if not isinstance(labels, Mapping):
        return [FieldError(field, "type", "must be an object of label key to value")]
    errors: list[FieldError] = []
    if len(labels) > MAX_NODE_LABELS:
        errors.append(
            FieldError(
                field,
                "max-node-labels",
                f"has {len(labels)} labels; Kueue allows at most {MAX_NODE_LABELS}",
            )
        )
    for key, value in labels.items():
        problem = names.qualified_name_error(key)
        if problem:
            errors.append(FieldError(f"{field}.{key}", "label-key", problem))
        value_problem = names.label_value_error(value)
        if value_problem:
            errors.append(FieldError(f"{field}.{key}", "label-value", value_problem))
    return errors


def node_taint_errors(field: str, taints: Any) -> list[FieldError]:
    if not isinstance(taints, list):
        return [FieldError(field, "type", "must be a list of taints")]
    errors: list[FieldError] = []
    if len(taints) > MAX_NODE_TAINTS:
        errors.append(
            FieldError(
                field,
                "max-node-taints",
                f"has {len(taints)} taints; Kueue allows at most {MAX_NODE_TAINTS}",
            )
        )
    seen: set[tuple[Any, Any]] = set()
    for i, taint in enumerate(taints):
        path = f"{field}[{i}]"
        if not isinstance(taint, Mapping):
            errors.append(FieldError(path, "type", "must be an object with key, value, effect"))
            continue
        errors.extend(_unknown_keys(path, taint, ("key", "value", "effect")))
        key = taint.get("key")
        problem = names.qualified_name_error(key) if isinstance(key, str) else "is required"
        if problem:
            errors.append(FieldError(f"{path}.key", "taint-key", problem))
        value = taint.get("value", "")
        value_problem = names.label_value_error(value)
        if value_problem:
            errors.append(FieldError(f"{path}.value", "label-value", value_problem))
        identity = (taint.get("key"), taint.get("effect"))
        if identity in seen:
            errors.append(
                FieldError(
                    path,
                    "duplicate-taint",
                    f"repeats key {identity[0]!r} with effect {identity[1]!r}; a node "
                    "has one taint per key and effect",
                )
            )
        seen.add(identity)
        if taint.get("effect") not in TAINT_EFFECTS:
            errors.append(
                FieldError(
                    f"{path}.effect",
                    "taint-effect",
                    f"{taint.get('effect')!r} is not a taint effect: use one of "
                    f"{', '.join(TAINT_EFFECTS)}",
                )
            )
    return errors


def toleration_errors(field: str, tolerations: Any) -> list[FieldError]:
    if not isinstance(tolerations, list):
        return [FieldError(field, "type", "must be a list of tolerations")]
    errors: list[FieldError] = []
    if len(tolerations) > MAX_TOLERATIONS:
        errors.append(
            FieldError(
                field,
                "max-tolerations",
                f"has {len(tolerations)} tolerations; Kueue allows at most {MAX_TOLERATIONS}",
            )
        )
    for i, tol in enumerate(tolerations):
        path = f"{field}[{i}]"
        if not isinstance(tol, Mapping):
            errors.append(FieldError(path, "type", "must be an object"))
            continue
        errors.extend(_one_toleration_errors(path, tol))
    return errors


def _one_toleration_errors(path: str, tol: Mapping[str, Any]) -> list[FieldError]:
    errors = _unknown_keys(path, tol, ("key", "operator", "value", "effect", "toleration_seconds"))
    operator = tol.get("operator", "Equal")
    key = tol.get("key", "")
    if operator not in TOLERATION_OPERATORS:
        errors.append(
            FieldError(
                f"{path}.operator",
                "toleration-operator",
                f"{operator!r} is not supported: use Equal or Exists",
            )
        )
    if key:
        problem = names.qualified_name_error(key)
        if problem:
            errors.append(FieldError(f"{path}.key", "toleration-key", problem))
    elif operator != "Exists":
        errors.append(
            FieldError(
                f"{path}.operator",
                "toleration-empty-key",
                "must be Exists when key is empty (which matches every taint)",
            )
        )
    if operator == "Exists" and tol.get("value"):
        errors.append(
            FieldError(
                f"{path}.value",
                "toleration-exists-value",
                "must be empty when operator is Exists",
            )
        )
    elif operator == "Equal":
        value_problem = names.label_value_error(tol.get("value", ""))
        if value_problem:
            errors.append(FieldError(f"{path}.value", "label-value", value_problem))
    effect = tol.get("effect", "")
    if effect and effect not in TAINT_EFFECTS:
        errors.append(
            FieldError(
                f"{path}.effect",
                "taint-effect",
                f"{effect!r} is not a taint effect: use one of "
                f"{', '.join(TAINT_EFFECTS)} (or leave empty for all)",
            )
        )
    errors.extend(_toleration_seconds_errors(path, tol.get("toleration_seconds"), effect))
    return errors


def _toleration_seconds_errors(path: str, seconds: Any, effect: Any) -> list[FieldError]:
    if seconds is not None and (
        isinstance(seconds, bool)
        or not isinstance(seconds, int)
        or not -INT64_MAX - 1 <= seconds <= INT64_MAX
    ):
        return [
            FieldError(
                f"{path}.toleration_seconds",
                "int64-range",
                "must be a whole number of seconds within 64 bits",
            )
        ]
    if seconds is not None and effect != "NoExecute":
        return [
            FieldError(
                f"{path}.toleration_seconds",
                "toleration-seconds-no-execute",
                "only applies to the NoExecute effect",
            )
        ]
    return []


def topology_errors(topology_name: str, node_labels: Mapping[str, str]) -> list[FieldError]:
    if not topology_name:
        return []
    errors = name_errors("topology_name", topology_name)
    if not node_labels:
        errors.append(
            FieldError(
                "topology_name",
                "topology-needs-node-label",
                "needs at least one node label, so Kueue knows which nodes the topology covers",
            )
        )
    return errors


def _unknown_keys(path: str, obj: Mapping[str, Any], known: Sequence[str]) -> list[FieldError]:
    return [
        FieldError(
            f"{path}.{key}", "unknown-field", f"is not a known field; expected {', '.join(known)}"
        )
        for key in obj
        if key not in known
    ]
