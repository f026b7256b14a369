"""Snapshots of what the cluster holds, taken every sync: each ClusterQueue's
quota and use (with lending attributed to lenders), the nodes' capacity per
flavor, how scattered the free GPUs are (``cluster.gang_fit``), queue status,
and team usage; with each new snapshot instant, the borrowing and fair-share
rollups."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from cluster.gang_fit import snapshot_gang_fit
from cluster.models import CapacitySnapshot, ObservedNode, QueueSnapshot, QueueStatus
from cluster.rollups import count_borrowing
from cluster.state import PolicyUnavailable
from cluster.sync import GPU, amount_of
from cluster.utilisation import busy_gpus, by_queue, snapshot_teams
from queues.backends.base import TYPES, ClusterBackend
from queues.quantity import QuantityError, parse_decimal

log = logging.getLogger(__name__)


def _cohort_roots(backend: ClusterBackend) -> dict[str, str]:
    parents = {
        c["metadata"]["name"]: (c.get("spec") or {}).get("parentName", "")
        for c in backend.list(TYPES["Cohort"])[0]
    }

    def root(name: str) -> str:
        seen = set()
        while parents.get(name) and name not in seen:
            seen.add(name)
            name = parents[name]
        return name

    return {name: root(name) for name in parents}


def _attribute_lending(
    rows: list[QueueSnapshot], unused: dict[int, int], tree: dict[int, str]
) -> None:
    """Kueue reports what each queue borrows, not whose quota it borrows. Berth
    attributes a cohort tree's borrowing to its lenders in proportion to their
    unused lendable quota (largest remainder, so lent adds up to borrowed)."""
    groups: dict[tuple[str, str, str], list[int]] = {}
    for index, row in enumerate(rows):
        if tree.get(index):
            groups.setdefault((tree[index], row.flavor, row.resource), []).append(index)
    for members in groups.values():
        borrowed = sum(rows[i].borrowed for i in members)
        spare = sum(unused[i] for i in members)
        if not borrowed or not spare:
            continue
        borrowed = min(borrowed, spare)
        shares = {i: borrowed * unused[i] / spare for i in members}
        for i in members:
            rows[i].lent = int(shares[i])
        left = borrowed - sum(rows[i].lent for i in members)
        for i in sorted(members, key=lambda i: shares[i] - int(shares[i]), reverse=True)[:left]:
            rows[i].lent += 1


def _weight(value: Any) -> float:
    """Kueue's fair-sharing weight (a quantity, default 1)."""
    if value is None:
        return 1.0
    try:
        return float(parse_decimal(str(value)))
    except QuantityError:
        return 1.0


def snapshot_queues(backend: ClusterBackend, at: datetime | None = None) -> int:
    """One QueueSnapshot per ClusterQueue × flavor × resource, from Kueue's status:
    nominal quota, usage, borrowed, lent (attributed, see _attribute_lending)."""
    at = (at or timezone.now()).replace(microsecond=0)
    queues, _ = backend.list(TYPES["ClusterQueue"])
    roots = _cohort_roots(backend)
    rows: list[QueueSnapshot] = []
    unused: dict[int, int] = {}
    tree: dict[int, str] = {}
    weights: dict[str, float] = {}
    for queue in queues:
        name = queue["metadata"]["name"]
        spec = queue.get("spec", {})
        cohort = spec.get("cohortName", "")
        weights[name] = _weight((spec.get("fairSharing") or {}).get("weight"))
        status = queue.get("status") or {}
        nominal: dict[tuple[str, str], int] = {}
        lendable: dict[tuple[str, str], int | None] = {}
        for group in spec.get("resourceGroups", []):
            for flavor in group.get("flavors", []):
                for resource in flavor.get("resources", []):
                    key = (flavor["name"], resource["name"])
                    nominal[key] = amount_of(resource["name"], resource.get("nominalQuota", 0))
                    limit = resource.get("lendingLimit")
                    lendable[key] = None if limit is None else amount_of(resource["name"], limit)
        used: dict[tuple[str, str], tuple[int, int]] = {}
        for flavor in status.get("flavorsReservation") or status.get("flavorsUsage") or []:
            for resource in flavor.get("resources", []):
                used[(flavor["name"], resource["name"])] = (
                    amount_of(resource["name"], resource.get("total", 0)),
                    amount_of(resource["name"], resource.get("borrowed", 0)),
                )
        for key in sorted(set(nominal) | set(used)):
            total, borrowed = used.get(key, (0, 0))
            spare = max(0, nominal.get(key, 0) - total)
            limit = lendable.get(key)
            unused[len(rows)] = spare if limit is None else min(spare, limit)
            tree[len(rows)] = roots.get(cohort, cohort)
            rows.append(
                QueueSnapshot(
                    at=at,
                    cluster_queue=name,
                    flavor=key[0],
                    resource=key[1],
                    nominal=nominal.get(key, 0),
                    usage=total,
                    borrowed=borrowed,
                    pending_workloads=int(status.get("pendingWorkloads") or 0),
                    admitted_workloads=int(status.get("admittedWorkloads") or 0),
                )
            )
    _attribute_lending(rows, unused, tree)
    busy = by_queue()
    if busy is not None:
        for row in rows:
            if row.resource == GPU:
                row.utilised = round(busy.get((row.cluster_queue, row.flavor), 0.0), 3)
    previous = QueueSnapshot.objects.filter(at__lte=at).aggregate(at=Max("at"))["at"]
    QueueSnapshot.objects.bulk_create(rows, ignore_conflicts=True)
    if previous != at:  # a second snapshot of the same instant adds nothing
        interval = float(settings.BERTH_SYNC_INTERVAL)
        # Borrowing between snapshots is taken as what the newer one saw; a long
        # gap (sync stopped) counts as one interval or two, not the whole gap.
        gap = (at - previous).total_seconds() if previous else interval
        count_borrowing(rows, tree, weights, min(gap, 2 * interval))
    return len(rows)


def record_nodes(nodes: Iterable[Mapping[str, Any]], at: datetime) -> None:
    """Keep the nodes as they are now (estimates place gangs on them); writes
    only what changed since the last sync."""
    stored = {n.name: (n.labels, n.allocatable) for n in ObservedNode.objects.all()}
    seen = []
    for node in nodes:
        name = node["metadata"]["name"]
        seen.append(name)
        labels = dict(node["metadata"].get("labels") or {})
        allocatable = {
            str(resource): amount_of(resource, value)
            for resource, value in ((node.get("status") or {}).get("allocatable") or {}).items()
        }
        if stored.get(name) != (labels, allocatable):
            ObservedNode.objects.update_or_create(
                name=name,
                defaults={"labels": labels, "allocatable": allocatable, "changed_at": at},
            )
    if set(stored) - set(seen):
        ObservedNode.objects.exclude(name__in=seen).delete()


def snapshot_capacity(
    backend: ClusterBackend, flavors: Iterable[Mapping[str, Any]], at: datetime | None = None
) -> int:
    """Allocatable resources of the nodes each flavor's node labels select, and
    for GPUs how many were busy (cluster.utilisation)."""
    at = (at or timezone.now()).replace(microsecond=0)
    nodes, _ = backend.list(TYPES["Node"])
    record_nodes(nodes, at)
    flavors = list(flavors)
    busy, measured_by = busy_gpus(nodes, flavors)
    held: dict[tuple[str, str], int] = {}
    for flavor_name, resource_name, usage in QueueSnapshot.objects.filter(at=at).values_list(
        "flavor", "resource", "usage"
    ):
        held[(flavor_name, resource_name)] = held.get((flavor_name, resource_name), 0) + usage
    rows = []
    for flavor in flavors:
        labels = flavor.get("spec", {}).get("nodeLabels") or {}
        matching = [
            n
            for n in nodes
            if all(n.get("metadata", {}).get("labels", {}).get(k) == v for k, v in labels.items())
        ]
        totals: dict[str, int] = {}
        largest: dict[str, int] = {}
        for node in matching:
            for resource, value in (node.get("status", {}).get("allocatable") or {}).items():
                amount = amount_of(resource, value)
                totals[resource] = totals.get(resource, 0) + amount
                largest[resource] = max(largest.get(resource, 0), amount)
        for resource, amount in sorted(totals.items()):
            rows.append(
                CapacitySnapshot(
                    at=at,
                    flavor=flavor["metadata"]["name"],
                    resource=resource,
                    allocatable=amount,
                    largest_node=largest[resource],
                    nodes=len(matching),
                    utilised=round(busy.get(flavor["metadata"]["name"], 0.0), 3)
                    if busy is not None and resource == GPU
                    else None,
                    utilisation_source=measured_by if resource == GPU and busy is not None else "",
                    allocated=held.get((flavor["metadata"]["name"], resource), 0),
                )
            )
    CapacitySnapshot.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def sync_queue_status(backend: ClusterBackend, at: datetime | None = None) -> int:
    """Mirror ClusterQueue and LocalQueue status; writes only what changed, and
    drops queues that are gone. Returns how many rows were written."""
    at = at or timezone.now()
    written = 0
    seen: set[tuple[str, str, str]] = set()
    stored = {(q.kind, q.namespace, q.name): q for q in QueueStatus.objects.all()}
    for kind in ("ClusterQueue", "LocalQueue"):
        for obj in backend.list(TYPES[kind])[0]:
            metadata = obj["metadata"]
            key = (kind, metadata.get("namespace", ""), metadata["name"])
            seen.add(key)
            status = obj.get("status") or {}
            fields = {
                "cluster_queue": (obj.get("spec") or {}).get("clusterQueue", "")
                if kind == "LocalQueue"
                else metadata["name"],
                "pending_workloads": int(status.get("pendingWorkloads") or 0),
                "reserving_workloads": int(status.get("reservingWorkloads") or 0),
                "admitted_workloads": int(status.get("admittedWorkloads") or 0),
                "status": status,
            }
            row = stored.get(key)
            if row is not None and all(getattr(row, k) == v for k, v in fields.items()):
                continue
            QueueStatus.objects.update_or_create(
                kind=kind,
                namespace=key[1],
                name=key[2],
                defaults={**fields, "observed_at": at},
            )
            written += 1
    gone = [row.pk for key, row in stored.items() if key not in seen]
    QueueStatus.objects.filter(pk__in=gone).delete()
    return written


def snapshot_cluster(backend: ClusterBackend, at: datetime | None = None) -> tuple[int, int]:
    """Queue usage and node capacity at one instant; returns the row counts."""
    at = (at or timezone.now()).replace(microsecond=0)
    flavors, _ = backend.list(TYPES["ResourceFlavor"])
    queues, capacity = snapshot_queues(backend, at), snapshot_capacity(backend, flavors, at)
    snapshot_teams(at)
    try:  # on the nodes snapshot_capacity has just recorded
        snapshot_gang_fit(at)
    except PolicyUnavailable:
        log.exception("gang-fit snapshot skipped: the stored policy does not load")
    return queues, capacity
