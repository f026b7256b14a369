"""Policy objects as plain dicts in the API's input shape.

A snapshot is what a client would send to recreate the object: references by
name, quantities in Kubernetes notation. Services merge a PATCH into the
snapshot and validate the result as a whole, and history stores snapshots as
"before" and "after".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from queues.durations import format_go
from queues.models import (
    ClusterQueue,
    Cohort,
    KueueConfiguration,
    LocalQueue,
    QueueClass,
    Quota,
    ResourceFlavor,
    Team,
    Topology,
    WorkloadPriorityClass,
)
from queues.quantity import format_canonical


def _name(obj: Any, attr: str = "name") -> str | None:
    return getattr(obj, attr) if obj is not None else None


def resource_groups_from_quotas(quotas: Iterable[Quota]) -> list[dict[str, Any]]:
    """Rebuild Kueue's groups → flavors → resources nesting from quota rows.

    Every flavor of a group lists the same resources, so the first flavor's
    resources are the group's covered resources."""
    groups: list[dict[str, Any]] = []
    position: tuple[int, int] | None = None
    first_flavor_of_group: int | None = None
    for quota in sorted(quotas, key=lambda q: (q.group_index, q.flavor_index, q.resource_index)):
        if not groups or quota.group_index != groups[-1]["_index"]:
            groups.append({"_index": quota.group_index, "covered_resources": [], "flavors": []})
            first_flavor_of_group = quota.flavor_index
        group = groups[-1]
        if position != (quota.group_index, quota.flavor_index):
            position = (quota.group_index, quota.flavor_index)
            group["flavors"].append({"name": quota.flavor.name, "resources": []})
        if quota.flavor_index == first_flavor_of_group:
            group["covered_resources"].append(quota.resource)
        entry: dict[str, Any] = {
            "name": quota.resource,
            "nominal_quota": format_canonical(quota.resource, quota.nominal_quota),
        }
        if quota.borrowing_limit is not None:
            entry["borrowing_limit"] = format_canonical(quota.resource, quota.borrowing_limit)
        if quota.lending_limit is not None:
            entry["lending_limit"] = format_canonical(quota.resource, quota.lending_limit)
        group["flavors"][-1]["resources"].append(entry)
    for group in groups:
        del group["_index"]
    return groups


def _quotas(owner: ClusterQueue | Cohort) -> Iterable[Quota]:
    """The owner's quota rows, from the selectors' prefetch when there is one."""
    if "quotas" in getattr(owner, "_prefetched_objects_cache", {}):
        return owner.quotas.all()
    return owner.quotas.select_related("flavor")


def _weight(value: Any) -> str:
    """Decimal('1.000') -> "1", Decimal('0.500') -> "0.5"."""
    return format(value.normalize(), "f")


def team(obj: Team) -> dict[str, Any]:
    return {
        "slug": obj.slug,
        "name": obj.name,
        "description": obj.description,
        "namespaces": sorted(ns.name for ns in obj.namespaces.all()),
    }


def team_members(obj: Team) -> dict[str, Any]:
    members: dict[str, list[str]] = {"members": [], "approvers": []}
    for membership in obj.memberships.select_related("user").order_by("user__username"):
        members["members" if membership.role == "member" else "approvers"].append(
            membership.user.get_username()
        )
    return members


def topology(obj: Topology) -> dict[str, Any]:
    return {"name": obj.name, "description": obj.description, "levels": list(obj.levels)}


def resource_flavor(obj: ResourceFlavor) -> dict[str, Any]:
    return {
        "name": obj.name,
        "description": obj.description,
        "node_labels": dict(obj.node_labels),
        "node_taints": list(obj.node_taints),
        "tolerations": list(obj.tolerations),
        "capacity_type": obj.capacity_type,
        "topology_name": obj.topology_name,
    }


def cohort(obj: Cohort) -> dict[str, Any]:
    return {
        "name": obj.name,
        "description": obj.description,
        "parent": _name(obj.parent),
        "fair_sharing_weight": _weight(obj.fair_sharing_weight),
        "resource_groups": resource_groups_from_quotas(_quotas(obj)),
    }


def cluster_queue(obj: ClusterQueue) -> dict[str, Any]:
    return {
        "name": obj.name,
        "description": obj.description,
        "team": _name(obj.team, "slug"),
        "cohort": _name(obj.cohort),
        "queue_class": _name(obj.queue_class),
        "default_priority_class": _name(obj.default_priority_class),
        "queueing_strategy": obj.queueing_strategy,
        "within_cluster_queue": obj.within_cluster_queue,
        "reclaim_within_cohort": obj.reclaim_within_cohort,
        "borrow_within_cohort_policy": obj.borrow_within_cohort_policy,
        "borrow_within_cohort_max_priority_threshold": (
            obj.borrow_within_cohort_max_priority_threshold
        ),
        "fair_sharing_weight": _weight(obj.fair_sharing_weight),
        "when_can_borrow": obj.when_can_borrow,
        "when_can_preempt": obj.when_can_preempt,
        "flavor_fungibility_preference": obj.flavor_fungibility_preference,
        "stop_policy": obj.stop_policy,
        "admission_mode": obj.admission_mode,
        "resource_groups": resource_groups_from_quotas(_quotas(obj)),
    }


def local_queue(obj: LocalQueue) -> dict[str, Any]:
    return {
        "namespace": obj.namespace.name,
        "name": obj.name,
        "cluster_queue": obj.cluster_queue.name,
        "generated": obj.generated,
        "stop_policy": obj.stop_policy,
    }


def priority_class(obj: WorkloadPriorityClass) -> dict[str, Any]:
    return {"name": obj.name, "value": obj.value, "description": obj.description}


def queue_class(obj: QueueClass) -> dict[str, Any]:
    """Every policy field; a reference by the name of what it names."""
    return {
        f.name: _name(getattr(obj, f.name)) if f.is_relation else getattr(obj, f.name)
        for f in QueueClass.policy_fields()
    }


def _go(nanoseconds: int | None) -> str | None:
    return format_go(nanoseconds) if nanoseconds is not None else None


def kueue_configuration(obj: KueueConfiguration) -> dict[str, Any]:
    """Kueue's own camelCase shape (what ``PUT policy/kueue-configuration/``
    takes): a section that is off is null; durations are Go durations."""
    admission_fair_sharing = None
    if obj.admission_fair_sharing_enable:
        admission_fair_sharing = {
            "usageHalfLifeTime": _go(obj.usage_half_life_time_ns),
            "usageSamplingInterval": _go(obj.usage_sampling_interval_ns),
        }
    wait_for_pods_ready = None
    if obj.wait_for_pods_ready_enable:
        wait_for_pods_ready = {
            "enable": True,
            "timeout": _go(obj.wait_for_pods_ready_timeout_ns),
            "blockAdmission": obj.block_admission,
            "requeuingStrategy": {
                "timestamp": obj.requeuing_timestamp,
                "backoffLimitCount": obj.backoff_limit_count,
                "backoffBaseSeconds": obj.backoff_base_seconds,
                "backoffMaxSeconds": obj.backoff_max_seconds,
            },
            "recoveryTimeout": _go(obj.recovery_timeout_ns),
        }
    return {
        "fairSharing": {
            "enable": obj.fair_sharing_enable,
            "preemptionStrategies": obj.fair_sharing_preemption_strategies.split(","),
        },
        "admissionFairSharing": admission_fair_sharing,
        "waitForPodsReady": wait_for_pods_ready,
    }
