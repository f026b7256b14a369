"""How long does the history prune take over a year of records?

Fills a scratch database with what a year of sync leaves behind: queue and
capacity snapshots every ``--every`` seconds for ``--queues`` ClusterQueues
and two flavors, and ``--workloads`` ended workloads spread over the year with
``--events`` events each (COPY, so filling is quick). Then runs the prune the
hourly beat task runs (``cluster.retention.prune_history``), twice: the first
thins the backlog, the second is what every later hour costs. Prints rows
before and after, each run's time, and its longest single DELETE (the longest
any lock is held).

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/retention.py

Creates ``berth_bench_<pid>`` and drops it at the end. Prints figures;
asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime, timedelta

from org import with_scratch_database

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def fill(args: argparse.Namespace) -> None:
    from django.db import connection

    start = NOW - timedelta(days=args.days)
    instants = int(args.days * 86400 / args.every)
    queues = [f"team-{i:03d}" for i in range(args.queues)]
    began = time.perf_counter()
    with connection.cursor() as cursor:
        raw = cursor.connection
        with raw.cursor().copy(
            "COPY jobs_queuesnapshot (at, cluster_queue, flavor, resource, nominal, usage, "
            "borrowed, lent, pending_workloads, admitted_workloads) FROM STDIN"
        ) as copy:
            for i in range(instants):
                at = start + timedelta(seconds=i * args.every)
                for queue in queues:
                    copy.write_row((at, queue, "h100", "nvidia.com/gpu", 8, i % 9, 0, 0, 0, 1))
        with raw.cursor().copy(
            "COPY jobs_capacitysnapshot (at, flavor, resource, allocatable, largest_node, nodes, "
            "utilisation_source, allocated) FROM STDIN"
        ) as copy:
            for i in range(instants):
                at = start + timedelta(seconds=i * args.every)
                for flavor in ("h100-ondemand", "h100-spot"):
                    copy.write_row((at, flavor, "nvidia.com/gpu", 64, 8, 8, "", 0))
        with raw.cursor().copy(
            "COPY jobs_workloadrecord (uid, namespace, name, job_kind, job_name, local_queue, "
            "cluster_queue, priority, priority_class, requested, pod_sets, flavors, state, "
            "reason, message, created_at, finished_at, evictions, admission_checks, "
            "resource_version, synced_at) FROM STDIN"
        ) as copy:
            for i in range(args.workloads):
                at = start + timedelta(seconds=i * args.days * 86400 / max(1, args.workloads))
                copy.write_row(
                    (f"uid-{i}", "research", f"w-{i}", "Job", f"w-{i}", "research", "research",
                     0, "", "{}", "[]", "{}", "finished", "", "", at, at, 0, "{}", "", at)
                )  # fmt: skip
        cursor.execute(
            "INSERT INTO jobs_workloadevent (workload_id, type, at, reason, message, details) "
            "SELECT w.id, 'Created', w.created_at + (n || ' seconds')::interval, 'r' || n, '', "
            "'{}' FROM jobs_workloadrecord w, generate_series(1, %s) n",
            [args.events],
        )
        cursor.execute("ANALYZE")
    print(f"filled in {time.perf_counter() - began:.0f} s", flush=True)


def counts() -> dict[str, int]:
    from cluster.models import CapacitySnapshot, QueueSnapshot, WorkloadEvent, WorkloadRecord

    return {
        "queue snapshots": QueueSnapshot.objects.count(),
        "capacity snapshots": CapacitySnapshot.objects.count(),
        "workloads": WorkloadRecord.objects.count(),
        "workload events": WorkloadEvent.objects.count(),
    }


def run(args: argparse.Namespace) -> None:
    from cluster.retention import prune_history

    print(
        f"a year of history: {args.days} days, snapshots every {args.every} s for "
        f"{args.queues} queues and 2 flavors, {args.workloads} ended workloads × "
        f"{args.events} events",
        flush=True,
    )
    fill(args)
    before = counts()
    for label in ("first prune (the backlog)", "second prune (a later hour)"):
        began = time.perf_counter()
        report = prune_history(now=NOW, batch=args.batch)
        seconds = time.perf_counter() - began
        deleted = sum(report.deleted.values())
        print(
            f"{label}: {seconds:.1f} s, {deleted:,} rows deleted, longest DELETE "
            f"{report.longest_statement * 1000:.0f} ms",
            flush=True,
        )
    after = counts()
    print(f"{'table':<20} {'before':>12} {'after':>10}")
    for name, value in before.items():
        print(f"{name:<20} {value:>12,} {after[name]:>10,}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--every", type=int, default=60, help="seconds between snapshots")
    parser.add_argument("--queues", type=int, default=4)
    parser.add_argument("--workloads", type=int, default=50_000)
    parser.add_argument("--events", type=int, default=5)
    parser.add_argument("--batch", type=int, default=2000)
    args = parser.parse_args()
    return with_scratch_database("bench/retention.py", lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
