"""Why is my job pending? The engine's explanation for one job request, on
the cluster as sync last saw it."""

from __future__ import annotations

from typing import Any

from cluster.forecast import (
    Candidate,
    forecast_existing,
    forecast_new,
    kueue_pod_sets,
    pod_sets_of,
)
from jobs.models import JobRequest, JobState
from queues.access import other_teams_masked
from queues.models import TeamNamespace

WAITING = {JobState.SUBMITTED, JobState.QUEUED, JobState.QUOTA_RESERVED, JobState.PREEMPTED}


def _runtime(job: JobRequest) -> float | None:
    chosen = job.expected_runtime_seconds or job.max_runtime_seconds
    return float(chosen) if chosen else None


def explain_job(job: JobRequest) -> dict[str, Any]:
    """The state, and for a waiting job the engine's structured explanation,
    suggestions, queue position and estimated start."""
    answer: dict[str, Any] = {
        "job": job.pk,
        "name": job.name,
        "state": job.state,
        "cluster_queue": job.cluster_queue,
        "reason": job.reason,
        "message": job.message,
    }
    if job.state not in WAITING:
        answer["explanation"] = None
        return answer
    forecast = None
    if job.workload is not None:
        forecast = forecast_existing(f"{job.workload.namespace}/{job.workload.name}")
    if forecast is None:
        # Not on the cluster yet (or not synced): ask as if submitted now.
        forecast = forecast_new(
            Candidate(
                name=job.name,
                namespace=job.namespace,
                cluster_queue=job.cluster_queue,
                priority=job.priority,
                pod_sets=pod_sets_of(kueue_pod_sets(job.manifest[0])) if job.manifest else [],
                runtime=_runtime(job),
                local_queue=job.local_queue,
            )
        )
    answer.update(forecast.as_dict())
    return answer


def explain_for(user: Any, job: JobRequest) -> dict[str, Any]:
    """``explain_job`` as ``user`` may read it: the workloads it names that
    belong to another team read as that team's (queues.access)."""
    namespaces = TeamNamespace.objects.values_list("name", flat=True)
    return dict(other_teams_masked(user, explain_job(job), namespaces))
