"""Resource groups of ClusterQueues and Cohorts: validation against the stored
flavors, and storage as ``Quota`` rows."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from queues import quota_rules, rules
from queues.errors import FieldError
from queues.models import ClusterQueue, Cohort, Quota, ResourceFlavor
from queues.quota_rules import ResourceGroupSpec


@dataclass(frozen=True)
class ParsedQuota:
    """The quota-bearing fields of a ClusterQueue or Cohort, parsed."""

    weight: Decimal
    groups: list[ResourceGroupSpec]
    errors: list[FieldError]


def parse_quota_fields(spec: dict[str, Any], *, parent_field: str, owner: str) -> ParsedQuota:
    """Fair-sharing weight and resource groups; ``parent_field`` names the field
    whose emptiness means "nobody to borrow from or lend to"."""
    weight, errors = rules.parse_weight("fair_sharing_weight", spec["fair_sharing_weight"])
    groups, group_errors = resource_group_errors(
        spec["resource_groups"], has_parent=spec[parent_field] is not None, owner=owner
    )
    return ParsedQuota(weight if weight is not None else Decimal(1), groups, errors + group_errors)


def resource_group_errors(
    raw: Any, *, has_parent: bool, owner: str
) -> tuple[list[ResourceGroupSpec], list[FieldError]]:
    """Kueue's rules on the groups, plus: every flavor named must exist."""
    groups, errors = quota_rules.parse_resource_groups(raw, has_parent=has_parent, owner=owner)
    named = {
        (g, f): flavor.get("name")
        for g, group in enumerate(raw or [])
        if isinstance(group, dict)
        for f, flavor in enumerate(group.get("flavors") or [])
        if isinstance(flavor, dict) and isinstance(flavor.get("name"), str)
    }
    known = set(
        ResourceFlavor.objects.filter(name__in=set(named.values())).values_list("name", flat=True)
    )
    for (g, f), name in sorted(named.items()):
        if name not in known:
            errors.append(
                FieldError(
                    f"resource_groups[{g}].flavors[{f}].name",
                    "unknown-flavor",
                    f"there is no resource flavor named {name!r}; create it first",
                )
            )
    return groups, errors


def replace_quotas(owner: ClusterQueue | Cohort, groups: list[ResourceGroupSpec]) -> None:
    """Store ``groups`` as the owner's quota rows, replacing what was there."""
    owner_field = "cluster_queue" if isinstance(owner, ClusterQueue) else "cohort"
    Quota.objects.filter(**{owner_field: owner}).delete()
    flavors = {
        flavor.name: flavor
        for flavor in ResourceFlavor.objects.filter(
            name__in={fq.name for group in groups for fq in group.flavors}
        )
    }
    Quota.objects.bulk_create(
        Quota(
            **{owner_field: owner},
            group_index=g,
            flavor_index=f,
            resource_index=r,
            flavor=flavors[flavor_quotas.name],
            resource=quota.name,
            nominal_quota=quota.nominal_quota,
            borrowing_limit=quota.borrowing_limit,
            lending_limit=quota.lending_limit,
        )
        for g, group in enumerate(groups)
        for f, flavor_quotas in enumerate(group.flavors)
        for r, quota in enumerate(flavor_quotas.resources)
    )
