"""What the admission engine says about one job: can it ever fit its queue,
where would it land now, its place in line, when it may start, and why a
pending one waits. Reads Postgres through ``cluster.state`` only."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from cluster.models import PendingForecast, WorkloadRecord
from cluster.state import ClusterState, cluster_state, pod_set
from queues.display import kueue_text
from queues.engine.assign import Mode
from queues.engine.estimate import Pace as EnginePace
from queues.engine.estimate import estimate_all, estimate_start
from queues.engine.explain import Explanation, Shortfall, explain
from queues.engine.model import Policy, Workload
from queues.engine.scheduler import Scheduler
from queues.errors import FieldError
from queues.quantity import QuantityError, format_canonical, to_canonical
from queues.simulation.job_kinds import kind_of


def kueue_pod_sets(job: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pod sets of the Workload Kueue's integration makes for this job."""
    kind = kind_of(job)
    return [p.as_dict() for p in kind.pod_sets(job)] if kind else []


def pod_sets_of(pod_sets: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Kueue-shaped pod sets (name, count, template) as the engine shape sync
    stores: per-pod requests in canonical units, node selector, tolerations."""
    shapes = []
    for entry in pod_sets:
        spec = entry.get("template", {}).get("spec", {})
        requests: dict[str, int] = {}
        for container in spec.get("containers", []):
            for resource, value in (container.get("resources", {}).get("requests") or {}).items():
                try:
                    requests[resource] = requests.get(resource, 0) + to_canonical(resource, value)
                except QuantityError:
                    continue
        shapes.append(
            {
                "name": entry.get("name", "main"),
                "count": int(entry.get("count", 1)),
                "requests": requests,
                "node_selector": dict(spec.get("nodeSelector") or {}),
                "tolerations": list(spec.get("tolerations") or []),
                **({"min_count": entry["minCount"]} if "minCount" in entry else {}),
                **(
                    {"topology_request": dict(entry["topologyRequest"])}
                    if entry.get("topologyRequest")
                    else {}
                ),
            }
        )
    return shapes


@dataclass(frozen=True)
class Candidate:
    """A job as the engine sees it, before or after it exists on the cluster."""

    name: str
    namespace: str
    cluster_queue: str
    priority: int
    pod_sets: list[dict[str, Any]]
    runtime: float | None = None  # declared: seconds of work
    local_queue: str = ""  # its queue class, whose recorded runtimes stand in for none

    def workload(self, now: float, name: str | None = None) -> Workload:
        return Workload(
            name=name or self.name,
            namespace=self.namespace,
            cluster_queue=self.cluster_queue,
            local_queue=self.local_queue,
            pod_sets=tuple(pod_set(p) for p in self.pod_sets),
            priority=self.priority,
            creation_time=now,
            runtime=self.runtime,
        )


# The request field that sets a resource's amount per node.
PER_NODE_FIELD = {
    "nvidia.com/gpu": "gpus_per_node",
    "cpu": "cpu_per_node",
    "memory": "memory_per_node",
}


def never_fits(policy: Policy, candidate: Candidate) -> list[FieldError]:
    """Errors when the job could not be admitted even on an empty cluster: its
    queue's nominal quota plus all it may borrow is too small, or no flavor the
    queue lists can take its pods."""
    scheduler = Scheduler(policy, now=0.0)
    workload = candidate.workload(0.0)
    scheduler.add(workload)
    assignment = scheduler.assign(workload)
    if assignment.mode is not Mode.NO_FIT:
        return []
    explanation = explain(scheduler, workload.key)
    errors = [
        _too_big(candidate, shortfall)
        for shortfall in explanation.shortfalls
        if shortfall.never_fits
    ]
    if not errors:
        errors.append(
            FieldError(
                "queue",
                "never-fits",
                f"ClusterQueue {candidate.cluster_queue} can never admit this job: "
                + kueue_text(assignment.message() or explanation.message),
            )
        )
    return errors


def _too_big(candidate: Candidate, shortfall: Shortfall) -> FieldError:
    """The job's whole request (nodes × per node) against the most its queue
    could ever hold in that flavor, on the field that fixes it: fewer nodes
    when a smaller gang would fit, else less per node."""
    resource = shortfall.resource
    noun = "GPUs" if resource == "nvidia.com/gpu" else resource
    nodes = sum(int(p.get("count", 1)) for p in candidate.pod_sets)
    per_pod = {int((p.get("requests") or {}).get(resource, 0)) for p in candidate.pod_sets}
    per_node = per_pod.pop() if len(per_pod) == 1 else None
    maximum = to_canonical(resource, shortfall.maximum)
    asks = f"the job asks for {shortfall.requested} {noun} in all"
    if per_node is not None:
        asks += f" ({nodes} node{'s' if nodes != 1 else ''} × {_q(resource, per_node)} per node)"
    if shortfall.borrowing_limit is not None:
        limit = f"nominal quota {shortfall.nominal} + borrowing limit {shortfall.borrowing_limit}"
    elif shortfall.cohort_available is None:
        limit = f"nominal quota {shortfall.nominal}, and no cohort to borrow from"
    else:
        limit = f"nominal quota {shortfall.nominal} + what its cohort can lend"
    fewer_nodes = maximum // per_node if per_node else 0
    if nodes > 1 and fewer_nodes >= 1:
        field = "nodes"
        fix = f"use at most {fewer_nodes} node(s) of {_q(resource, per_node)} {noun}"
    else:
        field = PER_NODE_FIELD.get(resource, "nodes")
        fix = f"ask for at most {shortfall.maximum} {noun} in all"
    return FieldError(
        field,
        "never-fits",
        f"{asks}, but ClusterQueue {candidate.cluster_queue} can never admit more than "
        f"{shortfall.maximum} {noun} in flavor {shortfall.flavor}, even empty and "
        f"borrowing all it may ({limit}); {fix}, or use a queue with more quota",
    )


def readable(value: Any) -> Any:
    """The engine's explanation with Kueue's Go-printed taints written for
    people (``key=value:Effect``), every string of it, structure unchanged."""
    if isinstance(value, str):
        return kueue_text(value)
    if isinstance(value, dict):
        return {k: readable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [readable(v) for v in value]
    return value


def _q(resource: str, amount: int | None) -> str:
    return format_canonical(resource, amount or 0)


def _when(seconds: float | None) -> datetime | None:
    return datetime.fromtimestamp(seconds, UTC) if seconds is not None else None


@dataclass
class Forecast:
    fits_now: bool
    needs_preemption: bool
    flavors: dict[str, dict[str, str]]
    position: int | None
    ahead: int | None
    earliest_start: datetime | None
    latest_start: datetime | None
    explanation: dict[str, Any] = field(default_factory=dict)
    preempts: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "fits_now": self.fits_now,
            "needs_preemption": self.needs_preemption,
            "flavors": self.flavors,
            "queue_position": self.position,
            "workloads_ahead": self.ahead,
            "estimated_start": {
                "earliest": self.earliest_start.isoformat() if self.earliest_start else None,
                "latest": self.latest_start.isoformat() if self.latest_start else None,
            },
            "preempts": self.preempts,
            "explanation": self.explanation,
        }


def _victims(scheduler: Scheduler, key: str) -> list[str]:
    """The workloads the next cycle would evict for ``key`` (on a copy)."""
    trial = copy.deepcopy(scheduler)
    result = trial.cycle()
    return sorted(p.victim for p in result.preempted if p.preemptor == key)


def _engine_pace(state: ClusterState) -> EnginePace:
    return EnginePace(
        state.pace.requeue_delay,
        state.pace.eviction_delay,
        check_wait=state.pace.approval_timeout,
        check_left=state.check_left,
    )


def _forecast(state: ClusterState, key: str, *, estimate: bool) -> Forecast:
    scheduler = state.scheduler
    workload = scheduler.workloads[key]
    explanation: Explanation = explain(scheduler, key)
    if workload.admission is not None:
        started = _when(workload.admitted_at)
        return Forecast(
            True,
            False,
            dict(workload.admission),
            None,
            None,
            started,
            started,
            readable(explanation.as_dict()),
        )
    assignment = scheduler.assign(workload)
    flavors = assignment.flavors() if assignment.mode is not Mode.NO_FIT else {}
    start = (
        estimate_start(scheduler, key, pace=_engine_pace(state), arrivals=state.expected_arrivals())
        if estimate
        else None
    )
    # NO_CANDIDATES also ranks between NoFit and Fit, but nothing may be preempted.
    needs_preemption = assignment.mode in (Mode.PREEMPT, Mode.RECLAIM)
    victims = _victims(scheduler, key) if needs_preemption else []
    # "Fits now" means the next cycle admits it: where a rehearsal ran, heads
    # processed before it (other queues' too, on shared nodes) may take the room.
    rehearsed = explanation.next_cycle.get("outcome")
    return Forecast(
        fits_now=assignment.fits and rehearsed not in ("pending", "not-considered"),
        needs_preemption=needs_preemption,
        flavors=flavors,
        position=explanation.position,
        ahead=explanation.ahead,
        earliest_start=_when(start.earliest) if start else None,
        latest_start=_when(start.latest) if start else None,
        explanation=readable(explanation.as_dict()),
        preempts=victims,
    )


def forecast_new(candidate: Candidate, now: datetime | None = None) -> Forecast:
    """The job as if it were submitted now, on the cluster as sync last saw it."""
    state = cluster_state(now)
    scheduler = state.scheduler
    name = candidate.name
    while f"{candidate.namespace}/{name}" in scheduler.workloads:
        name = f"{name}-dry-run"  # a live workload of that name: the candidate still counts
    workload = candidate.workload(scheduler.now, name)
    if workload.runtime is not None:
        workload.runtime = state.pace.wall(workload.runtime)
    else:
        workload.runtime_range = state.runtime_range(candidate.local_queue, candidate.cluster_queue)
    scheduler.add(workload)
    return _forecast(state, workload.key, estimate=True)


def forecast_existing(workload_key: str, now: datetime | None = None) -> Forecast | None:
    """A synced workload's forecast; None when sync has not seen it live."""
    state = cluster_state(now)
    if workload_key not in state.scheduler.workloads:
        return None
    return _forecast(state, workload_key, estimate=True)


def refresh_pending_forecasts(now: datetime | None = None) -> int:
    """Explain and estimate every pending workload sync knows, in one pass over
    the engine (two forward runs for all start estimates), and store it for the
    pages. Returns how many forecasts are stored."""
    moment = now or timezone.now()
    state = cluster_state(moment)
    scheduler = state.scheduler
    estimates = estimate_all(
        scheduler, moment.timestamp(), pace=_engine_pace(state), arrivals=state.expected_arrivals()
    )
    ids = {
        f"{ns}/{name}": pk
        for pk, ns, name in WorkloadRecord.objects.filter(
            state__in=["pending", "evicted"]
        ).values_list("pk", "namespace", "name")
    }
    rows = []
    for key, estimate in estimates.items():
        if key not in ids:
            continue
        explanation = explain(scheduler, key)
        rows.append(
            PendingForecast(
                workload_id=ids[key],
                cluster_queue=explanation.cluster_queue,
                position=explanation.position,
                reason=explanation.reason[:64],
                message=kueue_text(explanation.message),
                earliest_start=_when(estimate.earliest),
                latest_start=_when(estimate.latest),
                explanation=readable(explanation.as_dict()),
                computed_at=moment,
            )
        )
    with transaction.atomic():
        PendingForecast.objects.all().delete()
        PendingForecast.objects.bulk_create(rows)
    return len(rows)
