"""What does a periodic sync cost when nothing changed?

On a scratch database: an organisation reconciled into the simulated cluster,
``--jobs`` jobs submitted and created on it, Kueue admitting what fits (the
rest pending), then one sync to record it all. Then ``--rounds`` syncs with
nothing changed on the cluster, as beat runs them between changes: for each
step, its seconds and SQL statements, and how many workload records and job
requests each round wrote. Prints figures; asserts nothing.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/sync.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from typing import Any

from org import build_org, with_scratch_database


def submit_all(admin: Any, backend: Any, jobs: int, teams: int) -> None:
    from jobs import services

    print(f"submitting {jobs} jobs and creating them on the simulated cluster ...", flush=True)
    for index in range(jobs):
        job = services.submit(
            admin,
            {
                "name": f"sync-{index}",
                "team": f"team-{index % teams:03d}",
                "queue": ("interactive-dev", "training-large", "eval-batch")[index % 3],
                "image": "registry.example.com/trainer:1",
                "nodes": 1,
                "gpus_per_node": 1,
                "command": ["python", "train.py"],
                "checkpoint_uri": f"s3://bench/sync-{index}",
            },
        )
        services.create_on_cluster(backend, job.pk)


def one_round(steps: dict[Any, Any]) -> dict[str, tuple[float, int]]:
    """Each sync step's (seconds, SQL statements), in run order."""
    from django.db import connection

    from cluster.sync_steps import run_sync

    statements = [0]

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        statements[0] += 1
        return execute(sql, params, many, context)

    found: dict[str, tuple[float, int]] = {}
    for name in steps:
        statements[0] = 0
        with connection.execute_wrapper(count):
            started = time.perf_counter()
            report = run_sync([name])
            seconds = time.perf_counter() - started
        if report.errors:
            print(f"  {name.value}: {report.errors}", file=sys.stderr)
        found[name.value] = (seconds, statements[0])
    return found


def run(args: argparse.Namespace) -> None:
    from django.contrib.auth import get_user_model
    from django.db.models import Max

    from cluster.models import WorkloadRecord
    from cluster.sync_steps import all_steps
    from jobs.models import JobRequest
    from queues.backends.simulated import SimulatedBackend
    from queues.models import ReconcileRun
    from queues.reconcile import reconcile
    from queues.simulation.kueue import SimulatedKueue

    if args.upsert_all:
        # As before the relist skipped unchanged Workloads: each one upserted
        # (a row lock, then "same version: nothing to write").
        import cluster.sync

        cluster.sync._recorded_versions = lambda uids: {}
    build_org(args.teams)
    admin = get_user_model().objects.create_superuser("bench", password="x")
    backend = SimulatedBackend()  # the configured one (BERTH_CLUSTER=simulated)
    reconcile(backend, trigger=ReconcileRun.Trigger.MANUAL)
    submit_all(admin, backend, args.jobs, args.teams)
    SimulatedKueue(backend, 60.0).tick(time.time())
    steps = all_steps()
    first = one_round(steps)
    print(f"first sync (records everything): {sum(s for s, _ in first.values()):.2f} s")
    print(
        f"{WorkloadRecord.objects.count()} workload records, "
        f"{JobRequest.objects.exclude(state='submitted').count()} jobs on the cluster; "
        f"{args.rounds} syncs with nothing changed ..."
    )
    totals: dict[str, list[tuple[float, int]]] = defaultdict(list)
    writes = []
    for _ in range(args.rounds):
        marks = (
            WorkloadRecord.objects.aggregate(m=Max("synced_at"))["m"],
            JobRequest.objects.aggregate(m=Max("updated_at"))["m"],
        )
        for name, figures in one_round(steps).items():
            totals[name].append(figures)
        writes.append(
            (
                WorkloadRecord.objects.filter(synced_at__gt=marks[0]).count(),
                JobRequest.objects.filter(updated_at__gt=marks[1]).count(),
            )
        )
    whole = [sum(totals[name][i][0] for name in totals) for i in range(args.rounds)]
    print(f"a sync with nothing changed: median {statistics.median(whole):.3f} s")
    for name, rounds in totals.items():
        seconds = statistics.median(s for s, _ in rounds)
        queries = statistics.median(q for _, q in rounds)
        print(f"  {name:<13} {seconds:7.3f} s  {queries:7.0f} SQL statements")
    records, jobs = writes[-1]
    print(f"  written per sync: {records} workload records, {jobs} job requests")
    if args.profile:
        import cProfile
        import pstats

        from cluster.sync_steps import SyncStepName, run_sync

        profile = cProfile.Profile()
        profile.runcall(run_sync, [SyncStepName(args.profile)])
        pstats.Stats(profile).sort_stats("cumulative").print_stats(25)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--teams", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", metavar="STEP", help="then profile one run of this step")
    parser.add_argument(
        "--upsert-all",
        action="store_true",
        help="for comparison: the relist upserts every listed Workload, changed or not",
    )
    args = parser.parse_args()
    os.environ.setdefault("BERTH_LOG_LEVEL", "warning")
    os.environ["BERTH_DEMO_LOAD"] = "false"
    return with_scratch_database("bench/sync.py", lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
