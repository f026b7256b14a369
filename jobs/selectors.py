"""Reads over what sync recorded, for pages and (later) the API."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.db.models import Count, Exists, OuterRef, QuerySet, Subquery

from cluster.models import WorkloadRecord, WorkloadState
from jobs.answer_cache import cached_answer
from jobs.models import JobRequest
from queues.access import visible_to

GPU = "nvidia.com/gpu"


def workloads_for(user: Any) -> QuerySet[WorkloadRecord]:
    """Every workload sync recorded that ``user`` may see — their teams'
    namespaces (every namespace, for an admin) — whoever created it: Berth, the
    demo load, kubectl. ``berth_job`` is the id of the Berth job it belongs to,
    or None when it was created some other way."""
    berth_job = JobRequest.objects.filter(workload_id=OuterRef("pk")).order_by("-id").values("id")
    workloads = WorkloadRecord.objects.exclude(state=WorkloadState.DELETED).annotate(
        berth_job=Subquery(berth_job[:1])
    )
    return visible_to(user, workloads)


def submitted_through_berth(
    workloads: QuerySet[WorkloadRecord], through_berth: bool = True
) -> QuerySet[WorkloadRecord]:
    """Only the workloads of Berth's jobs (or, with False, only the others)."""
    made = Exists(JobRequest.objects.filter(workload_id=OuterRef("pk")))
    return workloads.filter(made if through_berth else ~made)


def declared_runtimes(workloads: QuerySet[WorkloadRecord]) -> dict[int, int]:
    """Of these workloads, the seconds each one's job declared: the runtime
    its team expects, else its limit (the queue class's by default). The
    cluster app's forecasts ask this through ``cluster.declared``."""
    declared: dict[int, int] = {}
    for workload_id, expected, limit in JobRequest.objects.filter(
        workload__in=workloads
    ).values_list("workload_id", "expected_runtime_seconds", "max_runtime_seconds"):
        seconds = expected or limit
        if seconds:
            declared[workload_id] = int(seconds)
    return declared


def job_counts(team_ids: Iterable[int] | None = None) -> dict[str, int]:
    """Job requests by state (of these teams only, if given)."""
    teams = None if team_ids is None else list(team_ids)

    def count() -> dict[str, int]:
        jobs = JobRequest.objects.all()
        if teams is not None:
            jobs = jobs.filter(team_id__in=teams)
        return dict(jobs.values_list("state").annotate(n=Count("id")).values_list("state", "n"))

    return cached_answer("counts", teams, "", count)


def jobs_for(user: Any) -> QuerySet[JobRequest]:
    """The jobs ``user`` may see: their teams' (all of them for an admin)."""
    jobs = JobRequest.objects.select_related("team", "submitted_by", "workload")
    return visible_to(user, jobs)


# Steps the apps above add to a job's timeline (approvals: requested, decided,
# …), registered at start-up: jobs may not import them.
TimelineSource = Callable[[JobRequest], list[dict[str, Any]]]
_timeline_sources: list[TimelineSource] = []


def register_timeline_source(source: TimelineSource) -> None:
    if source not in _timeline_sources:
        _timeline_sources.append(source)


def timeline(job: JobRequest) -> list[dict[str, Any]]:
    """Berth's own steps (submitted, created, cancelled), those the apps above
    register (approvals), and the workload's events."""
    steps: list[dict[str, Any]] = [
        {"type": "submitted", "at": job.submitted_at, "reason": "", "message": "", "details": {}}
    ]
    if job.created_on_cluster_at:
        steps.append(
            {
                "type": "created-on-cluster",
                "at": job.created_on_cluster_at,
                "reason": "",
                "message": "",
                "details": {"uid": job.cluster_uid},
            }
        )
    if job.workload is not None:
        events = job.workload.events.order_by("at", "id")
        steps.extend(dict(e) for e in events.values("type", "at", "reason", "message", "details"))
    for more in _timeline_sources:
        steps.extend(more(job))
    if job.cancelled_at:
        steps.append(
            {
                "type": "cancelled",
                "at": job.cancelled_at,
                "reason": job.reason,
                "message": job.message,
                "details": {},
            }
        )
    # Cluster times have whole seconds: within a second, Berth's own step (it
    # submitted, then created) comes before what the cluster did with it.
    own = {"submitted": 0, "created-on-cluster": 1}
    return sorted(
        steps, key=lambda s: (s["at"].replace(microsecond=0), own.get(s["type"], 2), s["at"])
    )
