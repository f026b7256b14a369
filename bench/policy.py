"""How fast the policy layer is at the size of a large organisation.

Builds TEAMS teams, each with a ClusterQueue per team queue class
(interactive-dev, training-large, eval-batch) plus one shared urgent-release
queue, through the same services the API uses (validation, history, LocalQueue
generation), then times single writes and API reads at that size.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/policy.py

It creates a scratch database ``berth_bench_<pid>`` on that server and drops it
at the end. Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from org import build_org, quota_groups, with_scratch_database


def timed_request(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    result = action()
    elapsed = time.perf_counter() - started
    status = getattr(result, "status_code", 200)
    if status != 200:
        raise SystemExit(f"bench: a request answered {status}: {getattr(result, 'content', b'')!r}")
    return elapsed


def summary(label: str, seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return (
        f"{label:<44} n={len(seconds):<5} p50 {statistics.median(ordered) * 1000:7.1f} ms"
        f"   p95 {p95 * 1000:7.1f} ms   max {ordered[-1] * 1000:7.1f} ms"
    )


def run(teams: int) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    from accounts.services import create_token
    from queues import services
    from queues.models import ClusterQueue, LocalQueue, PolicyChange

    team_writes, queue_writes = build_org(teams)
    print(
        f"\npolicy at size: {ClusterQueue.objects.count()} cluster queues, "
        f"{LocalQueue.objects.count()} local queues, {PolicyChange.objects.count()} "
        "history entries"
    )
    print(summary("create team (+ its LocalQueues)", team_writes))
    print(summary("create cluster queue (+ LocalQueues)", queue_writes))

    target = ClusterQueue.objects.get(name="team-000-training-large")
    updates = []
    for step in range(20):
        updates.append(
            timed_request(
                lambda step=step: services.cluster_queues.update(
                    actor=None, obj=target, data={"resource_groups": quota_groups(2 + step % 2)}
                )
            )
        )
    print(summary("update one queue's quota", updates))

    admin = get_user_model().objects.create_superuser("bench", password="bench-password")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {create_token(user=admin, name='b').secret}")
    client.get("/api/v1/cluster-queues/")
    for page_size in (50, 500):
        reads = []
        for _ in range(10):
            reads.append(
                timed_request(
                    lambda ps=page_size: client.get("/api/v1/cluster-queues/", {"page_size": ps})
                )
            )
        with CaptureQueriesContext(connection) as queries:
            client.get("/api/v1/cluster-queues/", {"page_size": page_size})
        print(summary(f"GET cluster-queues page_size={page_size} ({len(queries)} queries)", reads))
    reads = [
        timed_request(lambda: client.get("/api/v1/cluster-queues/team-100-eval-batch/"))
        for _ in range(20)
    ]
    print(summary("GET one cluster queue", reads))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teams", type=int, default=200)
    parser.add_argument(
        "--with-reconcile",
        action="store_true",
        help="also reconcile after each write, in the request (the embedded mode without a "
        "worker); bench/reconcile.py times reconciles on their own",
    )
    args = parser.parse_args()
    if not args.with_reconcile:
        # With a worker, a write only queues its reconcile; measure the write.
        os.environ["BERTH_RECONCILE_ON_CHANGE"] = "0"
    return with_scratch_database("bench/policy.py", lambda: run(args.teams))


if __name__ == "__main__":
    sys.exit(main())
