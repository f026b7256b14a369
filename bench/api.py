"""Job API latency at the size of a busy cluster's history.

Builds the demo organisation, then JOBS job requests with one Workload record
each and EVENTS workload events in all (most jobs long finished, a few hundred
still pending or running), and times through the real URL stack:

- ``GET /api/v1/jobs/`` as an admin and as a team member, plain and filtered;
- ``POST /api/v1/jobs/?dry_run=true``: checks, render and the engine's
  forecast (fit, position, start estimate) on the live workloads.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/api.py

It creates a scratch database ``berth_bench_<pid>`` and drops it at the end.
Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from datetime import timedelta
from typing import Any

from org import with_scratch_database
from policy import summary, timed_request

LIVE = 300  # pending or running workloads the forecast has to consider


def _progress(label: str, done: int, total: int) -> None:
    print(f"\r  {label}: {done:,}/{total:,}", end="" if done < total else "\n", flush=True)


def build(jobs: int, events: int, seed: int = 7) -> None:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.utils import timezone

    from jobs.models import (
        EventType,
        JobRequest,
        JobState,
        WorkloadEvent,
        WorkloadRecord,
        WorkloadState,
    )
    from queues import services
    from queues.models import LocalQueue, Team

    call_command("seed_demo", "--quiet-logins", verbosity=0)
    rng = random.Random(seed)
    teams = list(Team.objects.filter(slug__in=["research", "serving", "platform"]))
    queues = {
        t.pk: LocalQueue.objects.filter(namespace__team=t).select_related("cluster_queue").first()
        for t in teams
    }
    member = get_user_model().objects.create_user("bench-member", password="x")
    services.set_membership(
        actor=None,
        team=Team.objects.get(slug="research"),
        username=member.username,
        role="member",
        present=True,
    )
    now = timezone.now()
    per_job = max(1, events // jobs)
    batch = 5000
    print(f"building {jobs:,} jobs, {jobs:,} workloads and {per_job * jobs:,} events")
    for start in range(0, jobs, batch):
        rows, records = [], []
        for i in range(start, min(jobs, start + batch)):
            team = teams[i % len(teams)]
            queue = queues[team.pk]
            assert queue is not None
            live = i >= jobs - LIVE
            submitted = now - timedelta(seconds=(jobs - i) * 30)
            wstate = (
                rng.choice([WorkloadState.PENDING, WorkloadState.ADMITTED])
                if live
                else rng.choice([WorkloadState.FINISHED] * 9 + [WorkloadState.FAILED])
            )
            gpus = rng.choice([1, 2, 4, 8])
            records.append(
                WorkloadRecord(
                    uid=f"bench-{i}",
                    namespace=queue.namespace.name,
                    name=f"job-bench-{i}",
                    team=team,
                    job_kind="Job",
                    job_name=f"bench-{i}",
                    local_queue=queue.name,
                    cluster_queue=queue.cluster_queue.name,
                    requested={"nvidia.com/gpu": gpus},
                    pod_sets=[{"name": "main", "count": 1, "requests": {"nvidia.com/gpu": gpus}}],
                    flavors={"main": {"nvidia.com/gpu": "h100-ondemand"}}
                    if wstate != WorkloadState.PENDING
                    else {},
                    state=wstate,
                    created_at=submitted,
                    admitted_at=submitted + timedelta(seconds=60)
                    if wstate != WorkloadState.PENDING
                    else None,
                )
            )
            state = {
                WorkloadState.PENDING: JobState.QUEUED,
                WorkloadState.ADMITTED: JobState.RUNNING,
                WorkloadState.FINISHED: JobState.SUCCEEDED,
                WorkloadState.FAILED: JobState.FAILED,
            }[wstate]
            rows.append(
                JobRequest(
                    name=f"bench-{i}",
                    team=team,
                    namespace=queue.namespace.name,
                    image="registry.example.com/trainer:1",
                    command=["python", "train.py"],
                    nodes=1,
                    gpus_per_node=gpus,
                    queue_class="training-large",
                    local_queue=queue.name,
                    cluster_queue=queue.cluster_queue.name,
                    checkpoint_uri="s3://bench/ckpt",
                    max_runtime_seconds=3600,
                    state=state,
                    submitted_at=submitted,
                    submitted_by=member,
                    manifest=[{"kind": "Job", "metadata": {"name": f"bench-{i}"}}],
                )
            )
        WorkloadRecord.objects.bulk_create(records)
        for row, record in zip(rows, records, strict=True):
            row.workload = record
        JobRequest.objects.bulk_create(rows)
        kinds = [EventType.CREATED, EventType.QUOTA_RESERVED, EventType.ADMITTED]
        event_rows = []
        for record in records:
            for k in range(per_job):
                event_rows.append(
                    WorkloadEvent(
                        workload=record,
                        type=kinds[k % 3] if k < per_job - 1 else EventType.FINISHED,
                        at=record.created_at + timedelta(seconds=k),
                        reason=f"r{k}",
                    )
                )
        WorkloadEvent.objects.bulk_create(event_rows, batch_size=batch)
        _progress("jobs", min(jobs, start + batch), jobs)
    from django.db import connection

    # A database in service is vacuumed by autovacuum; counts then read the index only.
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


def print_queries(action: Any) -> None:
    """The SQL one request runs, slowest first (with DEBUG-style timings)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        action()
    queries = sorted(captured.captured_queries, key=lambda q: -float(q["time"]))
    total = sum(float(q["time"]) for q in queries) * 1000
    print(f"    {len(queries)} queries, {total:.1f} ms in SQL")
    for query in queries[:3]:
        print(f"    {float(query['time']) * 1000:6.1f} ms  {query['sql'][:150]}")


def run(jobs: int, events: int, requests: int, show_queries: bool = False) -> None:
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    from accounts.services import create_token
    from jobs.models import JobRequest, WorkloadEvent

    started = time.perf_counter()
    build(jobs, events)
    print(
        f"built in {time.perf_counter() - started:.0f} s: {JobRequest.objects.count():,} jobs, "
        f"{WorkloadEvent.objects.count():,} events"
    )

    def client(username: str) -> APIClient:
        user = get_user_model().objects.get(username=username)
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {create_token(user=user, name='b').secret}")
        return api

    admin, member = client("admin"), client("bench-member")
    cases = [
        ("GET /jobs/ (admin, page 50)", admin, "/api/v1/jobs/"),
        ("GET /jobs/ (member, page 50)", member, "/api/v1/jobs/"),
        ("GET /jobs/?state=running (admin)", admin, "/api/v1/jobs/?state=running"),
        ("GET /jobs/?team=research&page=20", admin, "/api/v1/jobs/?team=research&page=20"),
        ("GET /jobs/ page_size=500 (admin)", admin, "/api/v1/jobs/?page_size=500"),
    ]
    print()
    for label, api, url in cases:
        api.get(url)  # warm
        times = [timed_request(lambda api=api, url=url: api.get(url)) for _ in range(requests)]
        print(summary(label, times))
        if show_queries:
            print_queries(lambda api=api, url=url: api.get(url))
    body: dict[str, Any] = {
        "name": "bench-dry-run",
        "image": "registry.example.com/trainer:1",
        "queue": "training-large",
        "nodes": 2,
        "gpus_per_node": 8,
        "checkpoint_uri": "s3://bench/dry-run",
        "command": ["python", "train.py"],
    }

    def dry_run() -> Any:
        return member.post("/api/v1/jobs/?dry_run=true", body, format="json")

    first = dry_run()
    if first.status_code != 200:
        raise SystemExit(f"bench: dry run answered {first.status_code}: {first.content!r}")
    times = [timed_request(dry_run) for _ in range(max(10, requests // 4))]
    print(summary(f"POST /jobs/?dry_run=true ({LIVE} live workloads)", times))
    if show_queries:
        print_queries(dry_run)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=200, help="requests per list case")
    parser.add_argument("--queries", action="store_true", help="show each case's SQL and times")
    args = parser.parse_args()
    return with_scratch_database(
        "bench/api.py", lambda: run(args.jobs, args.events, args.requests, args.queries)
    )


if __name__ == "__main__":
    sys.exit(main())
