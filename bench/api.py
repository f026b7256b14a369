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
import sys
import time
from typing import Any

from history import LIVE, bulk_jobs
from org import with_scratch_database
from policy import summary, timed_request


def build(jobs: int, events: int) -> None:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from queues import services
    from queues.models import LocalQueue, Team

    call_command("seed_demo", "--quiet-logins", verbosity=0)
    teams = Team.objects.filter(slug__in=["research", "serving", "platform"]).order_by("slug")
    queues = [
        LocalQueue.objects.filter(namespace__team=t)
        .select_related("cluster_queue", "namespace__team")
        .first()
        for t in teams
    ]
    member = get_user_model().objects.create_user("bench-member", password="x")
    services.set_membership(
        actor=None,
        team=Team.objects.get(slug="research"),
        username=member.username,
        role="member",
        present=True,
    )
    bulk_jobs([q for q in queues if q is not None], member, jobs, events)


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
    from cluster.models import WorkloadEvent
    from jobs.models import JobRequest

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
