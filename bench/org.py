"""Shared by the benchmarks that need a large organisation in a scratch
PostgreSQL database: create/drop the database, and build TEAMS teams, each with
a ClusterQueue per team queue class (interactive-dev, training-large,
eval-batch), plus one shared urgent-release queue that every team namespace
gets a LocalQueue for — four queue classes per team."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

ROOT = Path(__file__).resolve().parents[1]
TEAM_CLASSES = ("interactive-dev", "training-large", "eval-batch")
FLAVORS = ("h100-ondemand", "h100-spot")


def scratch_database(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    name = f"berth_bench_{os.getpid()}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name, urlunsplit(parts._replace(path=f"/{name}"))


def drop_database(url: str, name: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def with_scratch_database(script: str, run: Callable[[], None]) -> int:
    """Point Django at a fresh database on DATABASE_URL's server, run, drop it."""
    base_url = os.environ.get("DATABASE_URL", "")
    if not base_url.startswith("postgres"):
        print(
            f"{script} needs DATABASE_URL=postgresql://… (a server it may create a "
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
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        run()
    finally:
        from django.db import connections

        connections.close_all()
        drop_database(base_url, name)
    return 0


def quota_groups(gpus: int) -> list[dict[str, Any]]:
    return [
        {
            "covered_resources": ["cpu", "memory", "nvidia.com/gpu"],
            "flavors": [
                {
                    "name": flavor,
                    "resources": [
                        {"name": "cpu", "nominal_quota": str(24 * gpus), "borrowing_limit": "96"},
                        {"name": "memory", "nominal_quota": f"{256 * gpus}Gi"},
                        {
                            "name": "nvidia.com/gpu",
                            "nominal_quota": str(gpus),
                            "borrowing_limit": "4",
                        },
                    ],
                }
                for flavor in FLAVORS
            ],
        }
    ]


def timed(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def build_org(teams: int) -> tuple[list[float], list[float]]:
    """The organisation, through the services the API uses. Returns the seconds
    each team creation and each ClusterQueue creation took."""
    from queues import services

    for name in FLAVORS:
        services.resource_flavors.create(actor=None, data={"name": name})
    services.cohorts.create(actor=None, data={"name": "org"})
    services.cluster_queues.create(
        actor=None,
        data={
            "name": "urgent-release",
            "queue_class": "urgent-release",
            "cohort": "org",
            "resource_groups": quota_groups(8),
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
                            "resource_groups": quota_groups(2),
                        },
                    )
                )
            )
        if (index + 1) % max(1, teams // 10) == 0:
            print(f"  {index + 1}/{teams} teams", flush=True)
    return team_writes, queue_writes
