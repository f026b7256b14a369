"""Dashboard server time at the size of a large organisation's history.

Builds 200 teams × 3 team queues + a shared queue (601 ClusterQueues), 100,000
jobs with their Workload records and 1,000,000 events, and what sync keeps for
the pages: a queue and capacity snapshot every 5 minutes for 24 hours, hourly
wait and preemption rollups for 7 days, queue status and pending forecasts.
Then times, through the real URL stack with a signed-in session:
the overview, the queue list, one queue's page and the job list.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/dashboard.py

It creates a scratch database ``berth_bench_<pid>`` and drops it at the end.
Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from datetime import timedelta

from history import LIVE, bulk_jobs
from org import build_org, with_scratch_database
from policy import summary, timed_request

SNAPSHOT_EVERY = timedelta(minutes=5)


def build_history(jobs: int, events: int, seed: int = 11) -> None:
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from cluster.models import (
        BUCKET_FIELDS,
        CapacitySnapshot,
        PendingForecast,
        PreemptionRollup,
        QueueSnapshot,
        QueueStatus,
        WaitRollup,
        WorkloadRecord,
        WorkloadState,
    )
    from queues import services
    from queues.models import ClusterQueue, LocalQueue, Team

    rng = random.Random(seed)
    member = get_user_model().objects.create_user("bench-member", password="x")
    services.set_membership(
        actor=None,
        team=Team.objects.get(slug="team-000"),
        username=member.username,
        role="member",
        present=True,
    )
    local_queues = list(
        LocalQueue.objects.filter(cluster_queue__team__isnull=False).select_related(
            "cluster_queue", "namespace__team"
        )
    )
    bulk_jobs(local_queues, member, jobs, events)

    now = timezone.now().replace(second=0, microsecond=0)
    names = list(ClusterQueue.objects.values_list("name", flat=True))
    print(f"snapshots for {len(names)} queues every 5 min for 24 h, rollups for 7 d ...")
    steps = int(timedelta(hours=24) / SNAPSHOT_EVERY)
    snapshots, capacity = [], []
    for step in range(steps):
        at = now - SNAPSHOT_EVERY * (steps - step)
        usages = {name: rng.randint(0, 3) for name in names}
        for flavor in ("h100-ondemand", "h100-spot"):
            capacity.append(
                CapacitySnapshot(
                    at=at, flavor=flavor, resource="nvidia.com/gpu", allocatable=2400,
                    largest_node=8, nodes=300,
                    allocated=sum(usages.values()) if flavor == "h100-ondemand" else 0,
                )
            )  # fmt: skip
        for name in names:
            usage = usages[name]
            snapshots.append(
                QueueSnapshot(
                    at=at, cluster_queue=name, flavor="h100-ondemand", resource="nvidia.com/gpu",
                    nominal=2, usage=usage, borrowed=max(0, usage - 2), lent=max(0, 2 - usage),
                    pending_workloads=rng.randint(0, 2), admitted_workloads=rng.randint(0, 2),
                )
            )  # fmt: skip
        if len(snapshots) > 20000:
            QueueSnapshot.objects.bulk_create(snapshots)
            snapshots = []
    QueueSnapshot.objects.bulk_create(snapshots)
    CapacitySnapshot.objects.bulk_create(capacity)
    rollups, preemptions = [], []
    for hours in range(7 * 24):
        hour = (now - timedelta(hours=hours)).replace(minute=0)
        for name in names:
            admissions = rng.randint(0, 6)
            counts = {field: 0 for field in BUCKET_FIELDS}
            for _ in range(admissions):
                counts[BUCKET_FIELDS[rng.randint(0, 8)]] += 1
            rollups.append(
                WaitRollup(
                    cluster_queue=name, hour=hour, admissions=admissions,
                    wait_seconds_sum=admissions * 300.0, gpus_admitted=admissions * 4, **counts,
                )
            )  # fmt: skip
            if rng.random() < 0.05:
                preemptions.append(
                    PreemptionRollup(
                        cluster_queue=name, hour=hour, reason=rng.choice(
                            ["InClusterQueue", "InCohortReclamation", "InCohortFairSharing"]
                        ), count=rng.randint(1, 3), gpu_seconds_interrupted=3600.0,
                    )
                )  # fmt: skip
        if len(rollups) > 20000:
            WaitRollup.objects.bulk_create(rollups)
            rollups = []
    WaitRollup.objects.bulk_create(rollups)
    PreemptionRollup.objects.bulk_create(preemptions)
    QueueStatus.objects.bulk_create(
        QueueStatus(
            kind="ClusterQueue", name=name, cluster_queue=name, pending_workloads=1,
            admitted_workloads=2, observed_at=now,
        )
        for name in names
    )  # fmt: skip
    pending = WorkloadRecord.objects.filter(state=WorkloadState.PENDING)
    PendingForecast.objects.bulk_create(
        PendingForecast(
            workload=record, cluster_queue=record.cluster_queue, position=index + 1,
            reason="Pending", message="waiting for quota", computed_at=now,
            earliest_start=now + timedelta(minutes=10), latest_start=now + timedelta(hours=1),
        )
        for index, record in enumerate(pending[:LIVE])
    )  # fmt: skip
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


def run(teams: int, jobs: int, events: int, requests: int) -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from cluster.models import QueueSnapshot, WaitRollup, WorkloadEvent
    from jobs.models import JobRequest

    started = time.perf_counter()
    build_org(teams)
    build_history(jobs, events)
    print(
        f"built in {time.perf_counter() - started:.0f} s: {JobRequest.objects.count():,} jobs, "
        f"{WorkloadEvent.objects.count():,} events, {QueueSnapshot.objects.count():,} queue "
        f"snapshots, {WaitRollup.objects.count():,} wait rollups"
    )
    admin = get_user_model().objects.create_superuser("bench-admin", password="x")
    member = get_user_model().objects.get(username="bench-member")
    cases = [("admin", admin), ("member", member)]
    pages = [
        ("overview", "/"),
        ("queue list", "/queues/"),
        ("queue page", "/queues/team-000-training-large/"),
        ("job list", "/jobs/"),
        ("job list, filtered", "/jobs/?state=running&queue=team-001-training-large"),
        ("team page", "/teams/team-000/"),
    ]
    print()
    for role, user in cases:
        client = Client()
        client.force_login(user)
        for label, path in pages:
            client.get(path)  # warm
            times = [
                timed_request(lambda client=client, path=path: client.get(path))
                for _ in range(requests)
            ]
            print(summary(f"{label} ({role})", times))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teams", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=40, help="requests per page and role")
    args = parser.parse_args()
    os.environ["BERTH_RECONCILE_ON_CHANGE"] = "0"  # building the policy is not measured here
    return with_scratch_database(
        "bench/dashboard.py",
        lambda: run(args.teams, args.jobs, args.events, args.requests),
    )


if __name__ == "__main__":
    sys.exit(main())
