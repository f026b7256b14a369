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
from cluster.gang_fit import job_verdicts
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
    pod_sets: list[dict[str, Any]] = (
        list(job.workload.pod_sets) if job.workload is not None and job.workload.pod_sets else []
    )
    if not pod_sets and job.manifest:
        pod_sets = pod_sets_of(kueue_pod_sets(job.manifest[0]))
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
    answer.update(gang_fit(job.cluster_queue, pod_sets, fits_now=forecast.fits_now))
    return answer


def gang_fit(
    cluster_queue: str, pod_sets: list[dict[str, Any]], *, fits_now: bool
) -> dict[str, Any]:
    """Whether its pods find room together on the topology-aware flavors of its
    queue (``gang_fit``: a verdict per flavor and pod set), and for a job that
    does not fit now and finds its GPUs free but scattered, what it waits for in
    one sentence with the node counts (``fragmentation``)."""
    verdicts = job_verdicts(cluster_queue, pod_sets)
    scattered = [v for v in verdicts if v.fragmented] if not fits_now else []
    return {
        "gang_fit": [v.as_dict() for v in verdicts],
        "fragmentation": scattered[0].message if scattered else None,
    }


def explain_for(user: Any, job: JobRequest) -> dict[str, Any]:
    """``explain_job`` as ``user`` may read it: the workloads it names that
    belong to another team read as that team's (queues.access)."""
    namespaces = TeamNamespace.objects.values_list("name", flat=True)
    return dict(other_teams_masked(user, explain_job(job), namespaces))
