"""A whole what-if run at scale, as the worker runs it (``whatif.runs.execute``):
a generated scenario of ``--workloads`` workloads in ``--cohorts`` cohort
trees, today's policy beside a proposal, with 1 worker (the run replays
both policies side by side in its own process) and with 2 (the run shares
them out: this process is the run's worker, one ``celery worker``
subprocess the other). Prints, for each, when the first figures so far were
stored, the wall time, the parts and the peak memory of this process, and
checks the answers are the same (``--workers`` chooses the counts).

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres \\
    REDIS_URL=redis://127.0.0.1:6379/15 \\
    .venv/bin/python bench/whatif_celery.py --workloads 96000

It creates a scratch database ``berth_bench_<pid>`` and drops it at the end.
Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import resource
import threading
import time
from pathlib import Path

from org import with_scratch_database
from replay_celery import broker_queue, start_workers, stop, wait_for_workers


def scenario(cohorts: int, queues: int, workloads: int) -> str:
    """Cohort trees of ``queues`` ClusterQueues of 32 cores lending to each
    other, each offered about 28 cores on average: small jobs of 4 cores
    (mean 15 min) and one in 80 taking a queue's whole quota (mean 1 h),
    arriving at random over the same span."""
    per_queue = workloads // (cohorts * queues)
    small = per_queue * 79 // 80
    large = per_queue - small
    flavor = "{name: default, resources: [{name: cpu, nominalQuota: 32, borrowingLimit: 32}]}"
    rows = [
        f"  - {{name: cq-{c}-{q}, cohortName: cohort-{c}, "
        "preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}, "
        f"resourceGroups: [{{coveredResources: [cpu], flavors: [{flavor}]}}]}}"
        for c in range(cohorts)
        for q in range(queues)
    ]
    # 20 cores of small work and 8 of large, on average, per queue.
    small_rate, large_rate = 20 / (4 * 900), 8 / (32 * 3600)
    return (
        "resourceFlavors: [{name: default}]\n"
        "cohorts:\n" + "\n".join(f"  - {{name: cohort-{c}}}" for c in range(cohorts)) + "\n"
        "clusterQueues:\n" + "\n".join(rows) + "\n"
        "generate:\n  seed: 11\n  classes:\n"
        f"    - {{name: small, countPerQueue: {small}, rate: {small_rate:.6g}, "
        "runtime: {median: 300, mean: 900}, priority: 50, podSets: [{requests: {cpu: 4}}]}\n"
        f"    - {{name: large, countPerQueue: {large}, rate: {large_rate:.6g}, "
        "runtime: {median: 1800, mean: 3600}, priority: 200, podSets: [{requests: {cpu: 32}}]}\n"
    )


CHANGES = [
    {
        "cluster_queue": "cq-0-0",
        "field": "nominal_quota",
        "flavor": "default",
        "resource": "cpu",
        "value": "64",
    }
]


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=96_000)
    parser.add_argument("--cohorts", type=int, default=8)
    parser.add_argument("--queues", type=int, default=6, help="ClusterQueues per cohort")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], metavar="N")
    args = parser.parse_args()
    queue = broker_queue("whatif_celery.py")
    if queue is None:
        return 2
    return with_scratch_database("whatif_celery.py", lambda: bench(args, queue))


def bench(args: argparse.Namespace, queue: str) -> None:
    from django.conf import settings
    from django.db import connection

    from whatif.models import ReplayPart, WhatIfRun, WhatIfState
    from whatif.runs import execute

    text = scenario(args.cohorts, args.queues, args.workloads)
    logs = Path(os.environ["BERTH_DATA_DIR"])
    logs.mkdir(parents=True, exist_ok=True)
    answers = {}
    for workers in args.workers:
        settings.BERTH_REPLAY_WORKERS = workers
        # Stored as create_run stores a scenario run, but its task is not sent:
        # this process runs it, as the worker that took it would.
        run = WhatIfRun.objects.create(source="scenario", scenario=text, changes=CHANGES)
        others = start_workers(workers - 1, queue, logs)
        try:
            wait_for_workers(workers - 1, logs)
            started = time.perf_counter()
            first: list[float] = []

            def watch(run_id: int = run.pk, began: float = started, first: list = first) -> None:
                while not first:
                    result = WhatIfRun.objects.filter(pk=run_id).values_list("result", flat=True)
                    if (result.first() or {}).get("partial"):
                        first.append(time.perf_counter() - began)
                    time.sleep(0.2)
                connection.close()

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            state = execute(run.pk)
            wall = time.perf_counter() - started
            first.append(float("nan"))  # stop the watcher if nothing partial was seen
        finally:
            stop(others)
        run.refresh_from_db()
        if state != WhatIfState.SUCCEEDED:
            raise SystemExit(f"the run ended {state}: {run.error}")
        answers[workers] = run.result
        print(f"\n{workers} worker(s): {run.workloads:,} workloads, both policies")
        for part in ReplayPart.objects.filter(run=run):
            print(
                f"  part {part.index}: {part.worker:<24} {len(part.groups)} cohort trees, "
                f"{part.workloads:>7,} workloads, {part.seconds or 0:6.1f} s"
            )
        print(
            f"  first figures so far at {first[0]:.1f} s; answer at {wall:.1f} s; "
            f"peak RSS here {peak_mib():,.0f} MiB",
            flush=True,
        )
    same = all(answer == answers[args.workers[0]] for answer in answers.values())
    print(f"\nthe same answer with every worker count: {'yes' if same else 'NO'}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    raise SystemExit(main())
