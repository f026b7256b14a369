"""The impact preview on an approval request: the running work that makes room
for the urgent job, from the engine and from the evictions sync recorded,
with each victim's team, priority, running time, time since its last
checkpoint and the GPU-hours lost."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from django.utils import timezone

from approvals.controller import drive_approvals
from approvals.impact import impact_preview
from approvals.models import ApprovalRequest
from cluster.models import WorkloadRecord
from jobs.models import JobRequest, JobState
from queues.models import Team
from tests.approvals.approval_support import approvers
from tests.approvals.test_approvals_flow import URGENT
from tests.jobs.conftest import Org
from tests.jobs.simulated_cluster import Cluster

GPU = "nvidia.com/gpu"


def fill_the_cohort(cluster: Cluster, org: Org) -> dict[str, int]:
    """Every on-demand H100 of the cohort busy, research borrowing the urgent
    queue's 8 idle GPUs: research 3 × 8 (16 nominal + 8 borrowed), serving 2 × 8,
    research-dev 1 × 8."""
    jobs = {}
    for name in ("train-a", "train-b", "train-c"):
        jobs[name] = cluster.submit(org.alice, name=name, nodes=1, expected_runtime_seconds=36000)
    for name in ("serve-a", "serve-b"):
        jobs[name] = cluster.submit(
            org.bob,
            name=name,
            nodes=1,
            queue="training-large",
            expected_runtime_seconds=36000,
            checkpoint_uri="s3://bucket/serve",
        )
    jobs["dev"] = cluster.submit(
        org.alice,
        name="notebook",
        nodes=1,
        queue="interactive-dev",
        checkpoint_uri="",
        expected_runtime_seconds=8 * 3600,
    )
    return jobs


def test_the_preview_names_the_workload_preempted_to_make_room(org: Org, settings: Any) -> None:
    approvers()
    cluster = Cluster()
    t0 = time.time()
    jobs = fill_the_cohort(cluster, org)
    cluster.at(t0 - 300)  # five minutes ago (60x: well within every runtime)
    running = {n: JobRequest.objects.get(pk=i).state for n, i in jobs.items()}
    assert set(running.values()) == {JobState.RUNNING}, running

    urgent = cluster.submit(org.alice, **URGENT)
    # Kueue reclaims the borrowed GPUs first (the victim is evicted), then
    # reserves quota for the urgent job and asks for approval.
    for step in range(1, 5):
        cluster.at(t0 + step)
        if JobRequest.objects.get(pk=urgent).state == JobState.QUOTA_RESERVED:
            break
    assert JobRequest.objects.get(pk=urgent).state == JobState.QUOTA_RESERVED
    drive_approvals(cluster.backend)
    request = ApprovalRequest.objects.get(job_id=urgent)
    impact = request.impact
    assert len(impact["preempts"]) == 1, impact
    victim = impact["preempts"][0]
    assert victim["status"] == "preempted"
    assert victim["team"] == "research" and victim["workload"].startswith("research/job-train-")
    assert victim["gpus"] == 8 and victim["priority"] == 1000
    assert victim["priority_class"] == "train-low"
    # It ran from five minutes ago until its eviction; it checkpoints every
    # 1800 s (Berth's default), so all of that is lost.
    assert 295 <= victim["running_seconds"] <= 320
    assert victim["checkpoints"] is True
    assert victim["since_checkpoint_seconds"] == victim["running_seconds"]
    assert victim["gpu_hours_lost"] == round(8 * victim["running_seconds"] / 3600, 2)
    assert impact["gpu_hours_lost"] == victim["gpu_hours_lost"]
    assert "1 running workload (8 GPUs)" in impact["summary"]


def _record(
    queue: str, name: str, *, namespace: str, priority: int, minutes: int, **extra: Any
) -> WorkloadRecord:
    now = timezone.now()
    holds = extra.pop("state", "admitted") == "admitted"
    return WorkloadRecord.objects.create(
        uid=f"uid-{name}",
        namespace=namespace,
        name=name,
        cluster_queue=queue,
        local_queue=queue,
        team=Team.objects.get(slug=namespace) if namespace != "default" else None,
        priority=priority,
        requested={GPU: 8},
        pod_sets=[{"name": "main", "count": 1, "requests": {GPU: 8}}],
        flavors={"main": {GPU: "h100"}} if holds else {},
        state="admitted" if holds else "pending",
        created_at=now - timedelta(minutes=minutes),
        admitted_at=now - timedelta(minutes=minutes) if holds else None,
        **extra,
    )


def test_the_engine_finds_what_a_pending_workload_would_preempt(org: Org) -> None:
    """The engine's own view, before Kueue acts: the urgent workload waits and
    every GPU is busy, research borrowing the urgent queue's idle 8; one cycle
    on a copy of the cluster reclaims the newest, lowest-priority research one."""
    for name, minutes in (("train-a", 50), ("train-b", 40), ("train-c", 30)):
        _record("research", name, namespace="research", priority=1000, minutes=minutes)
    for name in ("serve-a", "serve-b"):
        _record("serving", name, namespace="serving", priority=1000, minutes=60)
    _record("research-dev", "notebook", namespace="research", priority=0, minutes=20)
    urgent = _record(
        "urgent",
        "release-fix",
        namespace="research",
        priority=100000,
        minutes=0,
        state="pending",
    )
    preview = impact_preview(urgent, timezone.now())
    assert [(v["workload"], v["status"]) for v in preview["preempts"]] == [
        ("research/train-c", "would-be-preempted")
    ], preview
    victim = preview["preempts"][0]
    assert victim["team"] == "research" and victim["gpus"] == 8
    assert 29 * 60 <= victim["running_seconds"] <= 31 * 60
    # No job request behind it: nothing says it checkpoints, so it all is lost.
    assert victim["checkpoints"] is False
    assert victim["gpu_hours_lost"] == round(8 * victim["running_seconds"] / 3600, 2)
    assert preview["gpus_preempted"] == 8


def test_nothing_is_preempted_when_the_queue_has_room(org: Org) -> None:
    urgent = _record(
        "urgent",
        "release-fix",
        namespace="research",
        priority=100000,
        minutes=0,
        state="pending",
    )
    preview = impact_preview(urgent, timezone.now())
    assert preview["preempts"] == [] and preview["gpu_hours_lost"] == 0
    assert preview["summary"].startswith("No running workload is preempted")
