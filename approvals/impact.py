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

Kueue preempts workloads that hold quota, admitted or only reserved (an
admission check, such as Berth's own approval, still Pending), by the same
rules: candidates ordered by priority, then by when their quota was reserved,
most recent first. So a workload waiting for approval can be a victim; its row
says so (``state`` ``reserved``, the checks it waits for, its pending approval
request): it is not running, loses only its reservation and queues again, and
no work is lost. The engine's trial therefore orders candidates by their
reservation time and knows their check states, as Kueue does, so it never
names a waiting workload where Kueue would take another one.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from approvals.models import ApprovalRequest, ApprovalState
from approvals.status import CHECK_NAME
from cluster.models import EventType, WorkloadEvent, WorkloadRecord, WorkloadState
from cluster.state import ClusterState, cluster_state
from jobs.models import JobRequest
from queues.engine.model import CheckState
from queues.engine.scheduler import Scheduler

# A victim's state when the preview looked: running (admitted), or holding
# quota only as a reservation while admission checks are pending.
RUNNING, RESERVED = "running", "reserved"
HOLDING = (WorkloadState.QUOTA_RESERVED, WorkloadState.ADMITTED, WorkloadState.EVICTED)


def _holders() -> dict[str, tuple[float | None, dict[str, CheckState]]]:
    """Quota holders sync saw: key -> (when their quota was reserved, epoch s;
    their admission checks' states)."""
    known = {s.value for s in CheckState}
    found = {}
    for namespace, name, reserved_at, checks in WorkloadRecord.objects.filter(
        state__in=HOLDING
    ).values_list("namespace", "name", "reserved_at", "admission_checks"):
        states = {
            str(check): CheckState(str(entry["state"]))
            for check, entry in (checks or {}).items()
            if isinstance(entry, dict) and entry.get("state") in known
        }
        found[f"{namespace}/{name}"] = (
            reserved_at.timestamp() if reserved_at is not None else None,
            states,
        )
    return found


def _trial_victims(record: WorkloadRecord, state: ClusterState) -> set[str]:
    """The workloads one cycle preempts for ``record`` on a copy of the cluster
    in which ``record`` waits for quota instead of holding it.

    The copy holds what Kueue's preemption sees: every workload holding quota,
    with its checks' states and, as its place in the candidates' order, when
    its quota was reserved (Kueue orders by that, not by admission; the
    engine's ``admitted_at`` is that moment). Other pending workloads are left
    out: Kueue already chose ``record`` for the quota it holds, so they do not
    compete for it here."""
    key = f"{record.namespace}/{record.name}"
    source = state.scheduler
    if key not in source.workloads:
        return set()
    holders = _holders()
    trial = Scheduler(source.policy, now=source.now)
    for workload in source.workloads.values():
        if workload.key == key:
            trial.add(
                dataclasses.replace(
                    workload, admission=None, admitted_at=None, check_states={}, evicting=False
                )
            )
            continue
        if workload.admission is None:
            continue
        reserved_at, checks = holders.get(workload.key, (None, {}))
        trial.add(
            dataclasses.replace(
                workload,
                admitted_at=reserved_at if reserved_at is not None else workload.admitted_at,
                check_states=checks or dict(workload.check_states),
            )
        )
    result = trial.cycle()
    return {p.victim for p in result.preempted if p.preemptor == key}


def _row(victim: _Victim, job: JobRequest | None) -> dict[str, Any]:
    record = victim.record
    interval = job.checkpoint_interval if job is not None else None
    running = max(0.0, victim.running) if victim.state == RUNNING else 0.0
    since_checkpoint = running % interval if interval else running
    return {
        "workload": f"{record.namespace}/{record.name}",
        "status": victim.status,
        # running: admitted, its work since the last checkpoint is lost;
        # reserved: not running yet (waiting for admission checks), it loses
        # only its quota reservation and queues again.
        "state": victim.state,
        "waiting_for": victim.waiting_for,
        "approval_id": victim.approval_id,
        "team": record.team.slug if record.team else "",
        "job_id": job.pk if job else None,
        "job": job.name if job else record.job_name,
        "priority": record.priority,
        "priority_class": record.priority_class,
        "gpus": record.gpus,
        "running_seconds": round(running),
        "checkpoints": interval is not None,
        "since_checkpoint_seconds": round(since_checkpoint),
        "gpu_hours_lost": round(record.gpus * since_checkpoint / 3600, 2),
    }


@dataclasses.dataclass
class _Victim:
    record: WorkloadRecord
    running: float
    status: str
    state: str = RUNNING
    waiting_for: list[str] = dataclasses.field(default_factory=list)
    approval_id: int | None = None


def _waiting_checks(record: WorkloadRecord) -> list[str]:
    return sorted(
        str(name)
        for name, entry in (record.admission_checks or {}).items()
        if not isinstance(entry, dict) or entry.get("state") != CheckState.READY.value
    )


def _already_preempted(record: WorkloadRecord) -> dict[str, _Victim]:
    """Victims Kueue preempted for ``record``, with what they had run: from
    their last admission, if it came after their last quota reservation (else
    they were preempted while waiting for admission checks, not running)."""
    found: dict[str, _Victim] = {}
    events = (
        WorkloadEvent.objects.filter(type=EventType.PREEMPTED, details__preemptor_uid=record.uid)
        .select_related("workload", "workload__team")
        .order_by("at", "id")
    )
    for event in events:
        victim = event.workload
        before = WorkloadEvent.objects.filter(workload=victim, at__lte=event.at)
        started, reserved = (
            before.filter(type=kind).order_by("-at").values_list("at", flat=True).first()
            for kind in (EventType.ADMITTED, EventType.QUOTA_RESERVED)
        )
        key = f"{victim.namespace}/{victim.name}"
        if started is not None and (reserved is None or started >= reserved):
            found[key] = _Victim(victim, (event.at - started).total_seconds(), "preempted")
        else:
            found[key] = _Victim(victim, 0.0, "preempted", RESERVED)
    return found


def _plural(count: int, one: str, many: str) -> str:
    return one if count == 1 else many


def _summary(rows: list[dict[str, Any]]) -> str:
    running = [r for r in rows if r["state"] == RUNNING]
    reserved = [r for r in rows if r["state"] != RUNNING]
    if not rows:
        return "No running workload is preempted: it fits in free or its own quota"
    parts = []
    if running:
        n, gpus = len(running), sum(r["gpus"] for r in running)
        lost = round(sum(r["gpu_hours_lost"] for r in running), 2)
        parts.append(
            f"{n} running {_plural(n, 'workload', 'workloads')} ({gpus} GPUs) "
            f"{_plural(n, 'makes', 'make')} room for it; {lost:g} GPU-hours of "
            f"{_plural(n, 'its', 'their')} work is lost"
        )
    if reserved:
        n, gpus = len(reserved), sum(r["gpus"] for r in reserved)
        approval = all(CHECK_NAME in r["waiting_for"] for r in reserved)
        waiting = "waiting for approval" if approval else "waiting for admission checks"
        parts.append(
            f"{n} {_plural(n, 'workload', 'workloads')} {waiting}, not running ({gpus} GPUs "
            f"reserved), {_plural(n, 'loses its', 'lose their')} quota reservation and "
            f"{_plural(n, 'queues', 'queue')} again; no work is lost"
        )
    return "; ".join(parts)


def impact_preview(
    record: WorkloadRecord, now: datetime, state: ClusterState | None = None
) -> dict[str, Any]:
    """The preview stored on an approval request (JSON). ``state``: the engine's
    view of the cluster at ``now``, when the caller has built it already (one
    per controller pass, however many requests it raises)."""
    victims = _already_preempted(record)
    engine_view = state if state is not None else cluster_state(now)
    trial = _trial_victims(record, engine_view) - set(victims)
    for key in sorted(trial):
        namespace, name = key.split("/", 1)
        found = (
            WorkloadRecord.objects.select_related("team")
            .filter(namespace=namespace, name=name, state__in=HOLDING)
            .order_by("-created_at")
            .first()
        )
        if found is None:
            continue
        if found.state == WorkloadState.QUOTA_RESERVED or found.admitted_at is None:
            victims[key] = _Victim(found, 0.0, "would-be-preempted", RESERVED)
        else:
            running = (now - found.admitted_at).total_seconds()
            victims[key] = _Victim(found, running, "would-be-preempted")
    for victim in victims.values():
        if victim.state == RESERVED:
            victim.waiting_for = _waiting_checks(victim.record)
    pending = dict(
        ApprovalRequest.objects.filter(
            workload_uid__in=[v.record.uid for v in victims.values() if v.state == RESERVED],
            state=ApprovalState.PENDING,
        ).values_list("workload_uid", "pk")
    )
    for victim in victims.values():
        victim.approval_id = pending.get(victim.record.uid)
    jobs = {
        (j.namespace, j.kind, j.name): j
        for j in JobRequest.objects.filter(
            namespace__in={v.record.namespace for v in victims.values()}
        )
    }
    rows = [
        _row(v, jobs.get((v.record.namespace, v.record.job_kind, v.record.job_name)))
        for v in victims.values()
    ]
    rows.sort(key=lambda r: (-r["gpu_hours_lost"], r["state"] != RUNNING, r["workload"]))
    return {
        "computed_at": now.isoformat(),
        "preempts": rows,
        "gpus_preempted": sum(r["gpus"] for r in rows),
        "gpu_hours_lost": round(sum(r["gpu_hours_lost"] for r in rows), 2),
        "summary": _summary(rows),
    }
