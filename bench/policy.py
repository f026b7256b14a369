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
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

ROOT = Path(__file__).resolve().parents[1]
TEAM_CLASSES = ("interactive-dev", "training-large", "eval-batch")


def scratch_database(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    name = f"berth_bench_{os.getpid()}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name, urlunsplit(parts._replace(path=f"/{name}"))


def drop_database(url: str, name: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def timed(action: Callable[[], Any]) -> float:
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
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    from accounts.services import create_token
    from queues import services
    from queues.models import ClusterQueue, LocalQueue, PolicyChange

    call_command("migrate", verbosity=0)
    for name in ("h100-ondemand", "h100-spot"):
        services.resource_flavors.create(actor=None, data={"name": name})
    services.cohorts.create(actor=None, data={"name": "org"})

    def groups(gpus: int) -> list[dict[str, Any]]:
        return [
            {
                "covered_resources": ["cpu", "memory", "nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": flavor,
                        "resources": [
                            {
                                "name": "cpu",
                                "nominal_quota": str(24 * gpus),
                                "borrowing_limit": "96",
                            },
                            {"name": "memory", "nominal_quota": f"{256 * gpus}Gi"},
                            {
                                "name": "nvidia.com/gpu",
                                "nominal_quota": str(gpus),
                                "borrowing_limit": "4",
                            },
                        ],
                    }
                    for flavor in ("h100-ondemand", "h100-spot")
                ],
            }
        ]

    services.cluster_queues.create(
        actor=None,
        data={
            "name": "urgent-release",
            "queue_class": "urgent-release",
            "cohort": "org",
            "resource_groups": groups(8),
        },
    )
    team_writes: list[float] = []
    queue_writes: list[float] = []
    print(f"building {teams} teams × {len(TEAM_CLASSES)} queues + 1 shared queue ...", flush=True)
    for index in range(teams):
        slug = f"team-{index:03d}"
        team_writes.append(
            timed(
                lambda slug=slug: services.teams.create(
                    actor=None, data={"slug": slug, "name": slug.title()}
                )
            )
        )
        for queue_class in TEAM_CLASSES:
            queue_writes.append(
                timed(
                    lambda slug=slug, qc=queue_class: services.cluster_queues.create(
                        actor=None,
                        data={
                            "name": f"{slug}-{qc}",
                            "team": slug,
                            "queue_class": qc,
                            "cohort": "org",
                            "resource_groups": groups(2),
                        },
                    )
                )
            )
        if (index + 1) % max(1, teams // 10) == 0:
            print(f"  {index + 1}/{teams} teams", flush=True)

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
            timed(
                lambda step=step: services.cluster_queues.update(
                    actor=None, obj=target, data={"resource_groups": groups(2 + step % 2)}
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
                timed(lambda ps=page_size: client.get("/api/v1/cluster-queues/", {"page_size": ps}))
            )
        with CaptureQueriesContext(connection) as queries:
            client.get("/api/v1/cluster-queues/", {"page_size": page_size})
        print(summary(f"GET cluster-queues page_size={page_size} ({len(queries)} queries)", reads))
    reads = [
        timed(lambda: client.get("/api/v1/cluster-queues/team-100-eval-batch/")) for _ in range(20)
    ]
    print(summary("GET one cluster queue", reads))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teams", type=int, default=200)
    args = parser.parse_args()
    base_url = os.environ.get("DATABASE_URL", "")
    if not base_url.startswith("postgres"):
        print(
            "bench/policy.py needs DATABASE_URL=postgresql://… (a server it may create a "
            "scratch database on)",
            file=sys.stderr,
        )
        return 2
    name, url = scratch_database(base_url)
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    os.environ.setdefault("BERTH_DATA_DIR", f"/tmp/{name}")
    os.environ["BERTH_ALLOWED_HOSTS"] = "testserver"  # Django's test client host
    sys.path.insert(0, str(ROOT))
    try:
        run(args.teams)
    finally:
        from django.db import connections

        connections.close_all()
        drop_database(base_url, name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
