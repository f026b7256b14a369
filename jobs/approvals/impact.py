"""What approving costs: the running work that makes room for the workload.

Kueue preempts before it reserves quota, and admission checks run after the
reservation, so by the time a request is raised the cluster may already be
evicting the workload's victims. The preview therefore takes two views and
merges them, one row per victim:

- the engine's: the cluster as sync last saw it, with the workload put back in
  line without its reservation, and one admission cycle run on a copy: which
  running workloads it would preempt (``would-be-preempted``);
- the cluster's: the workloads whose Preempted condition names this workload's
  UID (``preempted``), with what they had run when they were stopped.

Each row has the victim's team, priority, how long it had run, the time since
its last checkpoint and the GPU-hours that are lost (that time × its GPUs; all
of its running time when it does not checkpoint).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from jobs.cluster_state import ClusterState, cluster_state
from jobs.models import EventType, JobRequest, WorkloadEvent, WorkloadRecord
from queues.engine.scheduler import Scheduler


def _trial_victims(record: WorkloadRecord, state: ClusterState) -> dict[str, float | None]:
    """Victim key -> its admitted_at (epoch s), from one cycle on a copy of the
    cluster in which ``record`` waits for quota instead of holding it."""
    key = f"{record.namespace}/{record.name}"
    source = state.scheduler
    if key not in source.workloads:
        return {}
    trial = Scheduler(source.policy, now=source.now)
    for workload in source.workloads.values():
        copy = dataclasses.replace(workload, check_states=dict(workload.check_states))
        if copy.key == key:
            copy = dataclasses.replace(
                copy, admission=None, admitted_at=None, check_states={}, evicting=False
            )
        trial.add(copy)
    result = trial.cycle()
    return {
        p.victim: source.workloads[p.victim].admitted_at
        for p in result.preempted
        if p.preemptor == key and p.victim in source.workloads
    }


def _row(
    victim: WorkloadRecord,
    job: JobRequest | None,
    running: float,
    status: str,
) -> dict[str, Any]:
    interval = job.checkpoint_interval if job is not None else None
    since_checkpoint = running % interval if interval else running
    return {
        "workload": f"{victim.namespace}/{victim.name}",
        "status": status,
        "team": victim.team.slug if victim.team else "",
        "job_id": job.pk if job else None,
        "job": job.name if job else victim.job_name,
        "priority": victim.priority,
        "priority_class": victim.priority_class,
        "gpus": victim.gpus,
        "running_seconds": round(running),
        "checkpoints": interval is not None,
        "since_checkpoint_seconds": round(since_checkpoint),
        "gpu_hours_lost": round(victim.gpus * since_checkpoint / 3600, 2),
    }


@dataclasses.dataclass
class _Victim:
    record: WorkloadRecord
    running: float
    status: str


def _already_preempted(record: WorkloadRecord) -> dict[str, _Victim]:
    found: dict[str, _Victim] = {}
    events = (
        WorkloadEvent.objects.filter(type=EventType.PREEMPTED, details__preemptor_uid=record.uid)
        .select_related("workload", "workload__team")
        .order_by("at", "id")
    )
    for event in events:
        victim = event.workload
        started = (
            WorkloadEvent.objects.filter(workload=victim, type=EventType.ADMITTED, at__lte=event.at)
            .order_by("-at")
            .values_list("at", flat=True)
            .first()
        )
        running = (event.at - started).total_seconds() if started else 0.0
        found[f"{victim.namespace}/{victim.name}"] = _Victim(victim, running, "preempted")
    return found


def impact_preview(
    record: WorkloadRecord, now: datetime, state: ClusterState | None = None
) -> dict[str, Any]:
    """The preview stored on an approval request (JSON). ``state``: the engine's
    view of the cluster at ``now``, when the caller has built it already (one
    per controller pass, however many requests it raises)."""
    victims = _already_preempted(record)
    engine_view = state if state is not None else cluster_state(now)
    for key, admitted_at in _trial_victims(record, engine_view).items():
        if key in victims:
            continue
        namespace, name = key.split("/", 1)
        found = (
            WorkloadRecord.objects.select_related("team")
            .filter(namespace=namespace, name=name)
            .order_by("-created_at")
            .first()
        )
        if found is not None:
            running = now.timestamp() - admitted_at if admitted_at is not None else 0.0
            victims[key] = _Victim(found, running, "would-be-preempted")
    jobs = {
        (j.namespace, j.kind, j.name): j
        for j in JobRequest.objects.filter(
            namespace__in={v.record.namespace for v in victims.values()}
        )
    }
    rows = [
        _row(
            v.record,
            jobs.get((v.record.namespace, v.record.job_kind, v.record.job_name)),
            max(0.0, v.running),
            v.status,
        )
        for v in victims.values()
    ]
    rows.sort(key=lambda r: (-r["gpu_hours_lost"], r["workload"]))
    lost = round(sum(r["gpu_hours_lost"] for r in rows), 2)
    gpus = sum(r["gpus"] for r in rows)
    if rows:
        summary = (
            f"{len(rows)} running workload{'s' if len(rows) != 1 else ''} "
            f"({gpus} GPUs) make room for it; {lost:g} GPU-hours of their work is lost"
        )
    else:
        summary = "No running workload is preempted: it fits in free or its own quota"
    return {
        "computed_at": now.isoformat(),
        "preempts": rows,
        "gpus_preempted": gpus,
        "gpu_hours_lost": lost,
        "summary": summary,
    }
