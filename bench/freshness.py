"""How fresh is a job's state with the workload watch running?

On a scratch database: one team's queues reconciled into the simulated
cluster, the workload watch running in a thread as ``manage.py sync_watch``
runs it, and no periodic sync. For each of ``--jobs`` jobs in turn: submit it,
create it on the cluster, let the simulated Kueue admit it, and time how long
until the job's own state (what the API and its page show) says admitted.
Then it is cancelled, freeing the quota for the next. Prints p50/p95/max of
that lag; asserts nothing.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/freshness.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from typing import Any

from org import build_org, with_scratch_database

SEEN = ("admitted", "running", "succeeded")


def watch_in_background(backend: Any, stop: threading.Event) -> threading.Thread:
    def run() -> None:
        from django.db import connection

        from cluster.sync import watch_workloads

        try:
            while not stop.is_set():
                watch_workloads(backend, timeout_seconds=2, rounds=1)
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def one_job(index: int, admin: Any, backend: Any, kueue: Any, timeout: float) -> float | None:
    from jobs import services
    from jobs.models import JobRequest

    job = services.submit(
        admin,
        {
            "name": f"fresh-{index}",
            "team": "team-000",
            "queue": "interactive-dev",
            "image": "registry.example.com/trainer:1",
            "nodes": 1,
            "gpus_per_node": 1,
            "command": ["python", "train.py"],
        },
    )
    services.create_on_cluster(backend, job.pk)
    kueue.tick(time.time())
    changed = time.monotonic()
    while time.monotonic() - changed < timeout:
        if JobRequest.objects.filter(pk=job.pk, state__in=SEEN).exists():
            lag = time.monotonic() - changed
            break
        time.sleep(0.02)
    else:
        lag = None
    services.cancel(admin, JobRequest.objects.get(pk=job.pk))
    services.delete_from_cluster(backend, job.pk)
    kueue.tick(time.time())
    return lag


def run(args: argparse.Namespace) -> None:
    from django.contrib.auth import get_user_model

    from queues.backends.simulated import SimulatedBackend
    from queues.models import ReconcileRun
    from queues.reconcile import reconcile
    from queues.simulation.kueue import SimulatedKueue

    build_org(1)
    admin = get_user_model().objects.create_superuser("bench", password="x")
    backend = SimulatedBackend()
    reconcile(backend, trigger=ReconcileRun.Trigger.MANUAL)
    kueue = SimulatedKueue(backend, 60.0)
    stop = threading.Event()
    watcher = watch_in_background(backend, stop)
    lags: list[float] = []
    missed = 0
    print(f"{args.jobs} jobs, one at a time, the watch following ...", flush=True)
    for index in range(args.jobs):
        lag = one_job(index, admin, backend, kueue, args.timeout)
        if lag is None:
            missed += 1
        else:
            lags.append(lag)
        if (index + 1) % max(1, args.jobs // 5) == 0:
            print(f"  {index + 1}/{args.jobs}", flush=True)
    stop.set()
    watcher.join(10)
    lags.sort()
    if not lags:
        print(f"no job's state followed within {args.timeout:.0f} s ({missed} jobs)")
        return
    p95 = lags[max(0, int(len(lags) * 0.95) - 1)]
    print(
        f"job state after Kueue admitted it: p50 {statistics.median(lags):.2f} s, "
        f"p95 {p95:.2f} s, max {lags[-1]:.2f} s over {len(lags)} jobs; "
        f"{missed} not seen within {args.timeout:.0f} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args()
    os.environ.setdefault("BERTH_LOG_LEVEL", "warning")  # not a line per task
    return with_scratch_database("bench/freshness.py", lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
