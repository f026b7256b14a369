"""The bridge from what Postgres knows to the admission engine: the policy as
rendered for Kueue, and the workloads sync last saw, as an engine Scheduler.

Dry runs, start estimates and "why pending" all read the cluster through this
module, never the cluster itself (request handlers do not talk to the cluster).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from cluster.declared import declared_seconds
from cluster.models import LIVE_STATES, ObservedNode, QueueStatus, WorkloadRecord, WorkloadState
from cluster.pace import Pace, cluster_pace
from cluster.runtimes import Runtimes, recorded_runtimes
from queues.engine.admission_fairness import consumed_from_status
from queues.engine.configuration import manager_configuration
from queues.engine.model import CheckState, PodSet, Policy, Toleration, Workload
from queues.engine.scenario import ScenarioError, parse
from queues.engine.scheduler import Scheduler
from queues.engine.topology import HOSTNAME, ClusterNode, TopologyRequest
from queues.kueue.manager_config import KEY as MANAGER_KEY
from queues.kueue.manager_config import NAME as MANAGER_NAME
from queues.kueue.manager_config import NAMESPACE as MANAGER_NAMESPACE
from queues.reconcile import desired_objects, policy_version

# Workload states that hold quota or wait for it; the rest are history.
ENGINE_KINDS = {
    "ResourceFlavor": "resourceFlavors",
    "Cohort": "cohorts",
    "ClusterQueue": "clusterQueues",
    "WorkloadPriorityClass": "workloadPriorityClasses",
    "Topology": "topologies",
}


class PolicyUnavailable(Exception):
    """The stored policy does not load into the engine (it should always)."""


def policy_from_objects(objects: Iterable[Mapping[str, Any]]) -> Policy:
    document: dict[str, Any] = {key: [] for key in ENGINE_KINDS.values()}
    for obj in objects:
        if is_manager_config(obj):
            document.update(manager_config_settings(obj))
            continue
        key = ENGINE_KINDS.get(obj.get("kind", ""))
        if key is None:
            continue
        bare = {
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "metadata": {"name": obj["metadata"]["name"]},
        }
        for part in ("spec", "value"):
            if part in obj:
                bare[part] = obj[part]
        document[key].append(bare)
    try:
        return parse(document, "the stored policy").policy
    except ScenarioError as exc:
        raise PolicyUnavailable(str(exc)) from exc


def is_manager_config(obj: Mapping[str, Any]) -> bool:
    """Kueue's manager ConfigMap, which Berth renders with the policy."""
    metadata = obj.get("metadata") or {}
    return (
        obj.get("kind") == "ConfigMap"
        and metadata.get("name") == MANAGER_NAME
        and metadata.get("namespace") == MANAGER_NAMESPACE
    )


def manager_config_settings(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The settings the engine reads from that ConfigMap, scenario-shaped."""
    return manager_configuration(str((obj.get("data") or {}).get(MANAGER_KEY, "")))


_cache_lock = threading.Lock()
_cached: tuple[int, Policy] | None = None


def current_policy() -> Policy:
    """The engine's view of the policy in Postgres (parsed once per policy
    version), with the nodes sync last saw when a flavor is topology-aware."""
    global _cached
    version = policy_version()
    with _cache_lock:
        cached = _cached[1] if _cached is not None and _cached[0] == version else None
    if cached is None:
        cached = policy_from_objects(desired_objects())
        with _cache_lock:
            _cached = (version, cached)
    return with_observed_nodes(cached)


def observed_nodes() -> list[dict[str, Any]]:
    """The nodes sync last saw, scenario-shaped (``nodes:``)."""
    return [
        {"name": node.name, "labels": dict(node.labels), "capacity": dict(node.allocatable)}
        for node in ObservedNode.objects.all()
    ]


def with_observed_nodes(policy: Policy) -> Policy:
    if not policy.topologies:
        return policy
    nodes = tuple(
        ClusterNode(
            row["name"],
            {**row["labels"], HOSTNAME: row["name"]},
            {str(k): int(v) for k, v in row["capacity"].items()},
        )
        for row in observed_nodes()
    )
    return dataclasses.replace(policy, nodes=nodes)


def pod_set(row: Mapping[str, Any]) -> PodSet:
    """An engine pod set from the shape sync stores (and dry runs build)."""
    return PodSet(
        str(row.get("name", "main")),
        int(row.get("count", 1)),
        {str(k): int(v) for k, v in (row.get("requests") or {}).items()},
        dict(row.get("node_selector") or {}),
        tuple(Toleration.from_kueue(t) for t in row.get("tolerations") or []),
        min_count=row.get("min_count"),
        topology_request=TopologyRequest.from_kueue(row.get("topology_request")),
    )


def _admitted(shapes: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    """Per pod set, what sync recorded of its admission (``admitted_count``:
    partial admission's pods; ``placed_on``: pods per node)."""
    found = {str(s.get("name", "main")): s[key] for s in shapes if s.get(key) is not None}
    return found or None


def _seconds(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None


@dataclass
class ClusterState:
    scheduler: Scheduler
    # How the cluster runs work: wall time per declared second, its delays.
    pace: Pace
    # What work recorded here ran for, for runtimes nobody declared.
    runtimes: Runtimes
    moment: datetime
    # Seconds until the admission checks of each workload waiting for them are due.
    check_left: dict[str, float] = field(default_factory=dict)
    _arrivals: list[Workload] | None = None

    def expected_arrivals(self) -> list[Workload]:
        """What may arrive next (read once): see ``expected_arrivals``."""
        if self._arrivals is None:
            self._arrivals = expected_arrivals(
                self.moment, self.scheduler.policy, self.runtimes, self.pace
            )
        return self._arrivals

    def runtime_range(
        self, local_queue: str, cluster_queue: str, ran: float = 0.0
    ) -> tuple[float, float] | None:
        return self.runtimes.range_for(local_queue, cluster_queue, ran)


def cluster_state(now: datetime | None = None, policy: Policy | None = None) -> ClusterState:
    """Every live workload sync recorded, on the current policy, at ``now``.
    Workloads of Berth's jobs run for the time their team expects, else their
    max runtime (the queue class's limit by default), in the cluster's time
    (the simulated one works faster); a workload nobody declared a runtime
    for runs as long as similar work recorded here did (a range), else
    forever."""
    moment = now or timezone.now()
    policy = policy or current_policy()
    pace = cluster_pace()
    runtimes = recorded_runtimes(moment)
    scheduler = Scheduler(policy, now=moment.timestamp())
    if scheduler.ledger is not None:  # admission fair sharing: usage so far, as Kueue saw it
        for namespace, name, status in QueueStatus.objects.filter(kind="LocalQueue").values_list(
            "namespace", "name", "status"
        ):
            saved = ((status or {}).get("fairSharing") or {}).get("admissionFairSharingStatus")
            if saved:
                scheduler.ledger.consumed[f"{namespace}/{name}"] = consumed_from_status(saved)
    live = WorkloadRecord.objects.filter(state__in=LIVE_STATES)
    declared = {
        workload_id: pace.wall(float(seconds))
        for workload_id, seconds in declared_seconds(live).items()
    }
    check_left: dict[str, float] = {}
    rows = live.order_by("created_at", "id")
    for row in rows.iterator(chunk_size=2000):
        if row.cluster_queue not in policy.cluster_queues:
            continue  # its queue is gone from the policy (being drained)
        holds = row.state != WorkloadState.PENDING and bool(row.flavors)
        admitted_at = _seconds(row.admitted_at) if holds else None
        runtime = declared.get(row.pk)
        ran = max(0.0, moment.timestamp() - admitted_at) if admitted_at is not None else 0.0
        workload = Workload(
            name=row.name,
            namespace=row.namespace,
            cluster_queue=row.cluster_queue,
            local_queue=row.local_queue,
            pod_sets=tuple(pod_set(p) for p in row.pod_sets),
            priority=row.priority,
            creation_time=row.created_at.timestamp(),
            runtime=runtime,
            runtime_range=(
                runtimes.range_for(row.local_queue, row.cluster_queue, ran)
                if runtime is None
                else None
            ),
            admission={k: dict(v) for k, v in row.flavors.items()} if holds else None,
            admitted_counts=_admitted(row.pod_sets, "admitted_count") if holds else None,
            topology_assignment=_admitted(row.pod_sets, "placed_on") if holds else None,
            admitted_at=admitted_at,
            check_states=_check_states(row) if holds else {},
            evicting=row.state == WorkloadState.EVICTED,
            evictions=row.evictions,
        )
        scheduler.add(workload)
        if holds and not workload.is_admitted:
            # Waiting for its checks (an approval): answered by its deadline at the latest.
            since = row.reserved_at or row.synced_at
            due = since.timestamp() + pace.approval_timeout
            check_left[workload.key] = max(0.0, due - moment.timestamp())
    return ClusterState(scheduler, pace, runtimes, moment, check_left)


def _check_states(row: WorkloadRecord) -> dict[str, CheckState]:
    """The admission checks of a workload holding quota, as sync last saw them."""
    states = {}
    for name, check in (row.admission_checks or {}).items():
        try:
            states[str(name)] = CheckState(str((check or {}).get("state", "Pending")))
        except ValueError:
            states[str(name)] = CheckState.PENDING
    return states


# The past stretch whose arrivals are expected again over the next one.
ARRIVALS_WINDOW = timedelta(hours=1)


def expected_arrivals(
    moment: datetime, policy: Policy, runtimes: Runtimes, pace: Pace
) -> list[Workload]:
    """The workloads created in the hour before ``moment`` once more, an hour
    later (on a cluster younger than that, what it has seen, shifted by its
    age): what the next hour may bring, for the pessimistic end of a start
    estimate. Each runs as long as it did, else as declared, else for what
    similar work ran."""
    # A cluster younger than the window repeats what it has seen, as often.
    first = WorkloadRecord.objects.order_by("created_at").values_list("created_at", flat=True)
    oldest = first.first()
    span = min(ARRIVALS_WINDOW, moment - oldest) if oldest is not None else ARRIVALS_WINDOW
    if span <= timedelta(0):
        return []
    rows = list(
        WorkloadRecord.objects.filter(
            created_at__gte=moment - span,
            created_at__lt=moment,
            cluster_queue__in=list(policy.cluster_queues),
        ).order_by("created_at", "id")
    )
    declared = {
        workload_id: pace.wall(float(seconds))
        for workload_id, seconds in declared_seconds(
            WorkloadRecord.objects.filter(pk__in=[row.pk for row in rows])
        ).items()
    }
    arrivals = []
    for row in rows:
        runtime: float | None = declared.get(row.pk)
        if row.admitted_at is not None and row.finished_at is not None:
            runtime = max(0.0, (row.finished_at - row.admitted_at).total_seconds())
        arrivals.append(
            Workload(
                name=f"{row.name}.next",
                namespace=row.namespace,
                cluster_queue=row.cluster_queue,
                local_queue=row.local_queue,
                pod_sets=tuple(pod_set(p) for p in row.pod_sets),
                priority=row.priority,
                creation_time=(row.created_at + span).timestamp(),
                runtime=runtime,
                runtime_range=(
                    runtimes.range_for(row.local_queue, row.cluster_queue)
                    if runtime is None
                    else None
                ),
            )
        )
    return arrivals
