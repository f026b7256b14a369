"""The validation rules Kueue applies to policy objects, in plainer words.

Each rule mirrors what a kube-apiserver with Kueue's CRDs and webhooks would
refuse (the CRD's OpenAPI limits, its ``x-kubernetes-validations`` and Kueue's
validating webhooks), so that Berth refuses it first, at the field the admin
typed. Functions take plain values and return ``FieldError`` lists; they never
raise on bad input. Rule identifiers are stable: clients and tests match on them.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from queues import names
from queues.errors import FieldError
from queues.quantity import QuantityError, parse_decimal, to_canonical

# Kueue's CRD limits (kueue.x-k8s.io/v1beta2, v0.19).
MAX_RESOURCE_GROUPS = 16
MAX_FLAVORS_PER_GROUP = 64
MAX_COVERED_RESOURCES = 64
MAX_NODE_LABELS = 8
MAX_NODE_TAINTS = 8
MAX_TOLERATIONS = 8
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MAX = 2**63 - 1
MAX_WEIGHT = Decimal(1_000_000)

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Equal", "Exists")


@dataclass(frozen=True)
class ResourceQuotaSpec:
    name: str
    nominal_quota: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True)
class FlavorQuotasSpec:
    name: str
    resources: tuple[ResourceQuotaSpec, ...]


@dataclass(frozen=True)
class ResourceGroupSpec:
    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotasSpec, ...]


# --------------------------------------------------------------------------- names


def name_errors(field: str, value: str, *, kind: str = "subdomain") -> list[FieldError]:
    """``kind`` is ``label`` (≤63, no dots) or ``subdomain`` (≤253, dots allowed)."""
    check = names.dns_label_error if kind == "label" else names.dns_subdomain_error
    problem = check(value)
    return [FieldError(field, f"dns-1123-{kind}", problem)] if problem else []


# --------------------------------------------------------------------------- quotas


def parse_resource_groups(
    raw: Any,
    *,
    field: str = "resource_groups",
    has_parent: bool,
    owner: str = "cluster queue",
) -> tuple[list[ResourceGroupSpec], list[FieldError]]:
    """Validate and parse resource groups given in the API/Kueue shape.

    ``raw`` is a list of ``{"covered_resources": [...], "flavors": [{"name": ...,
    "resources": [{"name", "nominal_quota", "borrowing_limit"?, "lending_limit"?}]}]}``
    with quantities as Kubernetes strings or integers. ``has_parent`` is whether
    the owner is in a cohort (for a ClusterQueue) or has a parent (for a Cohort):
    without one there is nobody to borrow from or lend to. A ClusterQueue's
    lendingLimit may not exceed its nominalQuota (Kueue's webhook); a Cohort's may,
    since it lends what its children lend as well.
    """
    errors: list[FieldError] = []
    if raw is None:
        return [], errors
    if not isinstance(raw, list):
        return [], [FieldError(field, "type", "must be a list of resource groups")]
    if len(raw) > MAX_RESOURCE_GROUPS:
        errors.append(
            FieldError(
                field,
                "max-resource-groups",
                f"has {len(raw)} resource groups; Kueue allows at most {MAX_RESOURCE_GROUPS}",
            )
        )
    groups: list[ResourceGroupSpec] = []
    resource_owner: dict[str, int] = {}
    flavor_owner: dict[str, int] = {}
    for g, group in enumerate(raw):
        path = f"{field}[{g}]"
        if not isinstance(group, Mapping):
            errors.append(FieldError(path, "type", "must be an object"))
            continue
        covered = group.get("covered_resources")
        covered_list = _covered_resources(path, covered, g, resource_owner, errors)
        flavors_raw = group.get("flavors")
        if not isinstance(flavors_raw, list) or not flavors_raw:
            errors.append(
                FieldError(f"{path}.flavors", "min-flavors", "must list at least one flavor")
            )
            continue
        if len(flavors_raw) > MAX_FLAVORS_PER_GROUP:
            errors.append(
                FieldError(
                    f"{path}.flavors",
                    "max-flavors-per-group",
                    f"has {len(flavors_raw)} flavors; Kueue allows at most "
                    f"{MAX_FLAVORS_PER_GROUP} in one resource group",
                )
            )
        flavors: list[FlavorQuotasSpec] = []
        for f, flavor in enumerate(flavors_raw):
            parsed = _flavor_quotas(
                f"{path}.flavors[{f}]", flavor, covered_list, has_parent, owner, errors
            )
            if parsed is None:
                continue
            if parsed.name in flavor_owner:
                errors.append(
                    FieldError(
                        f"{path}.flavors[{f}].name",
                        "flavor-in-two-groups",
                        f"flavor {parsed.name!r} is already listed in resource group "
                        f"{flavor_owner[parsed.name]}; a flavor may appear once per {owner}",
                    )
                )
            flavor_owner.setdefault(parsed.name, g)
            flavors.append(parsed)
        groups.append(ResourceGroupSpec(tuple(covered_list), tuple(flavors)))
    return groups, errors


def _covered_resources(
    path: str, covered: Any, group_index: int, owner: dict[str, int], errors: list[FieldError]
) -> list[str]:
    field = f"{path}.covered_resources"
    if not isinstance(covered, list) or not covered:
        errors.append(FieldError(field, "min-covered-resources", "must list at least one resource"))
        return []
    if len(covered) > MAX_COVERED_RESOURCES:
        errors.append(
            FieldError(
                field,
                "max-covered-resources",
                f"has {len(covered)} resources; Kueue allows at most {MAX_COVERED_RESOURCES}",
            )
        )
    result: list[str] = []
    for r, resource in enumerate(covered):
        problem = (
            names.qualified_name_error(resource)
            if isinstance(resource, str)
            else ("must be a resource name such as nvidia.com/gpu")
        )
        if problem:
            errors.append(FieldError(f"{field}[{r}]", "resource-name", problem))
            continue
        if resource in owner:
            where = (
                "earlier in this group"
                if owner[resource] == group_index
                else f"by resource group {owner[resource]}"
            )
            errors.append(
                FieldError(
                    f"{field}[{r}]",
                    "resource-in-two-groups",
                    f"{resource!r} is already covered {where}; each resource belongs to "
                    "exactly one resource group",
                )
            )
        owner.setdefault(resource, group_index)
        result.append(resource)
    return result


def _flavor_quotas(
    path: str,
    flavor: Any,
    covered: list[str],
    has_parent: bool,
    owner: str,
    errors: list[FieldError],
) -> FlavorQuotasSpec | None:
    if not isinstance(flavor, Mapping):
        errors.append(FieldError(path, "type", "must be an object with name and resources"))
        return None
    flavor_name = flavor.get("name")
    if not isinstance(flavor_name, str):
        errors.append(FieldError(f"{path}.name", "required", "must name a resource flavor"))
        return None
    errors.extend(name_errors(f"{path}.name", flavor_name))
    resources_raw = flavor.get("resources")
    if not isinstance(resources_raw, list):
        errors.append(FieldError(f"{path}.resources", "type", "must be a list of resource quotas"))
        return None
    if covered and len(resources_raw) != len(covered):
        errors.append(
            FieldError(
                f"{path}.resources",
                "resources-match-covered",
                f"lists {len(resources_raw)} resources but the group covers {len(covered)} "
                f"({', '.join(covered)}); every flavor must give a quota for each covered "
                "resource, in the same order",
            )
        )
    resources: list[ResourceQuotaSpec] = []
    for r, entry in enumerate(resources_raw):
        rpath = f"{path}.resources[{r}]"
        if not isinstance(entry, Mapping):
            errors.append(FieldError(rpath, "type", "must be an object"))
            continue
        resource = entry.get("name")
        if not isinstance(resource, str):
            errors.append(FieldError(f"{rpath}.name", "required", "must name the resource"))
            continue
        if r < len(covered) and resource != covered[r]:
            errors.append(
                FieldError(
                    f"{rpath}.name",
                    "resources-match-covered",
                    f"is {resource!r} but covered resource {r} is {covered[r]!r}; list the "
                    "quotas in the order of covered_resources",
                )
            )
        nominal = _quota(
            f"{rpath}.nominal_quota", resource, entry.get("nominal_quota"), errors, required=True
        )
        borrowing = _quota(
            f"{rpath}.borrowing_limit", resource, entry.get("borrowing_limit"), errors
        )
        lending = _quota(f"{rpath}.lending_limit", resource, entry.get("lending_limit"), errors)
        parent_word = "cohort" if owner == "cluster queue" else "parent cohort"
        if borrowing is not None and not has_parent:
            errors.append(
                FieldError(
                    f"{rpath}.borrowing_limit",
                    "borrowing-limit-needs-cohort",
                    f"must be empty when the {owner} has no {parent_word}: there is nobody "
                    "to borrow from",
                )
            )
        if lending is not None and not has_parent:
            errors.append(
                FieldError(
                    f"{rpath}.lending_limit",
                    "lending-limit-needs-cohort",
                    f"must be empty when the {owner} has no {parent_word}: there is nobody "
                    "to lend to",
                )
            )
        if (
            owner == "cluster queue"
            and lending is not None
            and nominal is not None
            and lending > nominal
        ):
            errors.append(
                FieldError(
                    f"{rpath}.lending_limit",
                    "lending-limit-above-nominal",
                    f"{entry.get('lending_limit')} is more than the nominal quota "
                    f"{entry.get('nominal_quota')}: a queue can lend at most what it owns",
                )
            )
        if nominal is not None:
            resources.append(ResourceQuotaSpec(resource, nominal, borrowing, lending))
    return FlavorQuotasSpec(flavor_name, tuple(resources))


def _quota(
    field: str, resource: str, value: Any, errors: list[FieldError], *, required: bool = False
) -> int | None:
    if value is None or value == "":
        if required:
            errors.append(FieldError(field, "required", "is required"))
        return None
    try:
        amount = to_canonical(resource, value)
    except QuantityError as exc:
        errors.append(FieldError(field, f"quantity-{exc.rule}", str(exc)))
        return None
    if amount < 0:
        errors.append(
            FieldError(field, "non-negative", f"{value} is negative; quotas must be 0 or more")
        )
        return None
    return amount


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
    if weight < 0:
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
        errors.extend(
            _unknown_keys(path, tol, ("key", "operator", "value", "effect", "toleration_seconds"))
        )
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
        seconds = tol.get("toleration_seconds")
        if seconds is not None and (
            isinstance(seconds, bool)
            or not isinstance(seconds, int)
            or not -INT64_MAX - 1 <= seconds <= INT64_MAX
        ):
            errors.append(
                FieldError(
                    f"{path}.toleration_seconds",
                    "int64-range",
                    "must be a whole number of seconds within 64 bits",
                )
            )
        elif seconds is not None and effect != "NoExecute":
            errors.append(
                FieldError(
                    f"{path}.toleration_seconds",
                    "toleration-seconds-no-execute",
                    "only applies to the NoExecute effect",
                )
            )
    return errors


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
