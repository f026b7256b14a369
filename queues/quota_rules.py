"""Kueue's rules for resource groups and their quotas, in plainer words.

A ClusterQueue's and a Cohort's ``resourceGroups`` are the largest part of
Kueue's policy validation, so they have their own module; the rules for names,
scalars and flavors stay in ``queues.rules``, which this one shares its
conventions with: functions take plain values, collect ``FieldError`` lists and
never raise on bad input, and rule identifiers are stable.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from queues import names
from queues.errors import FieldError
from queues.quantity import QuantityError, to_canonical, written_negative
from queues.rules import name_errors

# Kueue's CRD limits (kueue.x-k8s.io/v1beta2, v0.19).
MAX_RESOURCE_GROUPS = 16
MAX_FLAVORS_PER_GROUP = 64
MAX_COVERED_RESOURCES = 64


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
        quota = _resource_quota(
            f"{path}.resources[{r}]", entry, r, covered, has_parent, owner, errors
        )
        if quota is not None:
            resources.append(quota)
    return FlavorQuotasSpec(flavor_name, tuple(resources))


def _resource_quota(
    rpath: str,
    entry: Any,
    index: int,
    covered: list[str],
    has_parent: bool,
    owner: str,
    errors: list[FieldError],
) -> ResourceQuotaSpec | None:
    """One flavor's quota for one covered resource (``index`` in the group)."""
    if not isinstance(entry, Mapping):
        errors.append(FieldError(rpath, "type", "must be an object"))
        return None
    resource = entry.get("name")
    if not isinstance(resource, str):
        errors.append(FieldError(f"{rpath}.name", "required", "must name the resource"))
        return None
    if index < len(covered) and resource != covered[index]:
        errors.append(
            FieldError(
                f"{rpath}.name",
                "resources-match-covered",
                f"is {resource!r} but covered resource {index} is {covered[index]!r}; list the "
                "quotas in the order of covered_resources",
            )
        )
    nominal = _quota(
        f"{rpath}.nominal_quota", resource, entry.get("nominal_quota"), errors, required=True
    )
    borrowing = _quota(f"{rpath}.borrowing_limit", resource, entry.get("borrowing_limit"), errors)
    lending = _quota(f"{rpath}.lending_limit", resource, entry.get("lending_limit"), errors)
    errors.extend(_limit_errors(rpath, entry, nominal, borrowing, lending, has_parent, owner))
    if nominal is None:
        return None
    return ResourceQuotaSpec(resource, nominal, borrowing, lending)


def _limit_errors(
    rpath: str,
    entry: Mapping[str, Any],
    nominal: int | None,
    borrowing: int | None,
    lending: int | None,
    has_parent: bool,
    owner: str,
) -> list[FieldError]:
    """Borrowing and lending limits need someone to borrow from or lend to; a
    ClusterQueue lends at most its nominal quota."""
    errors: list[FieldError] = []
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
                f"must be empty when the {owner} has no {parent_word}: there is nobody to lend to",
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
    return errors


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
    if amount < 0 or written_negative(value):
        errors.append(
            FieldError(field, "non-negative", f"{value} is negative; quotas must be 0 or more")
        )
        return None
    return amount
