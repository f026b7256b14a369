"""A grant's changes to the policy, as deltas on quota fields, written through
the ClusterQueue service (validation, history, reconcile after the commit).

Deltas, not values: the revert takes back what the grant added, so an admin
who changed the same quota while the grant was active keeps their change."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from queues import snapshots
from queues.errors import PolicyInvalid
from queues.models import ClusterQueue
from queues.quantity import format_canonical, to_canonical
from queues.services import cluster_queues

NOMINAL, BORROWING, LENDING = "nominal_quota", "borrowing_limit", "lending_limit"


@dataclass(frozen=True)
class Delta:
    cluster_queue: str
    flavor: str
    resource: str
    field: str
    delta: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "cluster_queue": self.cluster_queue,
            "flavor": self.flavor,
            "resource": self.resource,
            "field": self.field,
            "delta": self.delta,
        }

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> Delta:
        return cls(
            str(row["cluster_queue"]),
            str(row["flavor"]),
            str(row["resource"]),
            str(row["field"]),
            int(row["delta"]),
        )

    def describe(self) -> str:
        amount = format_canonical(self.resource, abs(self.delta))
        sign = "+" if self.delta >= 0 else "-"
        return f"{self.cluster_queue} {self.flavor}/{self.resource} {self.field} {sign}{amount}"


def quota_entry(groups: list[dict[str, Any]], flavor: str, resource: str) -> dict[str, Any] | None:
    """The resource entry of ``flavor`` × ``resource`` in a snapshot's groups."""
    for group in groups:
        for flavor_quotas in group.get("flavors", []):
            if flavor_quotas.get("name") != flavor:
                continue
            for entry in flavor_quotas.get("resources", []):
                if entry.get("name") == resource:
                    return entry
    return None


def current(queue: ClusterQueue, flavor: str, resource: str, field: str) -> int | None:
    """The stored value (canonical), None when unset or the entry is missing."""
    entry = quota_entry(snapshots.cluster_queue(queue)["resource_groups"], flavor, resource)
    if entry is None or entry.get(field) is None:
        return None
    return to_canonical(resource, entry[field])


def shift(actor: Any, delta: Delta, *, field_path: str) -> int:
    """Add ``delta`` to the field (never below zero) through the ClusterQueue
    service; returns the change actually made. PolicyInvalid (naming
    ``field_path``) when the queue, the quota entry or the field is missing.
    The caller holds the policy write lock and the history note."""
    queue = ClusterQueue.objects.filter(name=delta.cluster_queue).first()
    if queue is None:
        raise PolicyInvalid.single(
            field_path, "unknown-reference", f"there is no cluster queue {delta.cluster_queue!r}"
        )
    groups = copy.deepcopy(snapshots.cluster_queue(queue)["resource_groups"])
    entry = quota_entry(groups, delta.flavor, delta.resource)
    if entry is None:
        raise PolicyInvalid.single(
            field_path,
            "no-quota",
            f"cluster queue {delta.cluster_queue} has no {delta.flavor} {delta.resource} "
            "quota any more",
        )
    if entry.get(delta.field) is None:
        raise PolicyInvalid.single(
            field_path,
            "no-limit",
            f"cluster queue {delta.cluster_queue} has no {delta.field} on {delta.flavor} "
            f"{delta.resource} (no limit)",
        )
    before = to_canonical(delta.resource, entry[delta.field])
    after = max(0, before + delta.delta)
    entry[delta.field] = format_canonical(delta.resource, after)
    cluster_queues.update(actor=actor, obj=queue, data={"resource_groups": groups})
    return after - before
