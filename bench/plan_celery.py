"""A capacity plan as the worker runs it (``whatif.capacity.execute_plan``):
a generated scenario of ``--workloads`` GPU jobs from ``--teams`` teams
sharing one cohort, searched for the h100 GPUs that keep team-0's p90 wait
under an hour, in ``--seeds`` seeds. With 1 worker the search replays one
capacity after another in its own process; with 2 (or ``--workers``) it
shares its replays out (``whatif.plan_scaleout``): this process is the
plan's worker, ``celery worker`` subprocesses the others, and they replay
what the search may ask for next while it waits. Prints, for each, the wall
time, the replays asked for and those replayed ahead but not asked, who
replayed them, and checks the answers are the same.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres \\
    REDIS_URL=redis://127.0.0.1:6379/15 \\
    .venv/bin/python bench/plan_celery.py --workloads 12000

It creates a scratch database ``berth_bench_<pid>`` and drops it at the end.
Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import collections
import os
import time
from pathlib import Path

from org import with_scratch_database
from replay_celery import broker_queue, start_workers, stop, wait_for_workers

DAY = 86_400


def scenario(teams: int, workloads: int) -> str:
    """``teams`` ClusterQueues of 32 h100 GPUs each (in nodes of 8), lending
    to each other; each team's jobs of 8 GPUs (median 1 h, mean 2 h) and 1
    GPU (mean 20 min) arrive at random over the same span, about 36 GPUs'
    worth a team: today most of them wait."""
    per_team = workloads // teams
    large, small = per_team // 3, per_team - per_team // 3
    # 8-GPU jobs of mean 2 h: 30 GPUs a team; 1-GPU jobs of 20 min: 6.
    large_rate, small_rate = 30 / (8 * 7200), 6 / 1200
    quota = "{name: nvidia.com/gpu, nominalQuota: 32, borrowingLimit: 64}"
    rows = [
        f"  - {{name: team-{t}, cohortName: org, "
        "preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}, "
        "resourceGroups: [{coveredResources: [nvidia.com/gpu], flavors: "
        f"[{{name: h100, resources: [{quota}]}}]}}]}}"
        for t in range(teams)
    ]
    return (
        "resourceFlavors: [{name: h100}]\n"
        "cohorts: [{name: org}]\n"
        "clusterQueues:\n" + "\n".join(rows) + "\n"
        "generate:\n  seed: 5\n  classes:\n"
        f"    - {{name: train, countPerQueue: {large}, rate: {large_rate:.6g}, "
        "runtime: {median: 3600, mean: 7200}, priority: 100, "
        "podSets: [{requests: {nvidia.com/gpu: 8}}]}\n"
        f"    - {{name: dev, countPerQueue: {small}, rate: {small_rate:.6g}, "
        "runtime: {median: 600, mean: 1200}, priority: 50, "
        "podSets: [{requests: {nvidia.com/gpu: 1}}]}\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=12_000)
    parser.add_argument("--teams", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], metavar="N")
    parser.add_argument("--timeline", action="store_true", help="print every replay")
    args = parser.parse_args()
    queue = broker_queue("plan_celery.py")
    if queue is None:
        return 2
    return with_scratch_database("plan_celery.py", lambda: bench(args, queue))


def bench(args: argparse.Namespace, queue: str) -> None:
    from django.conf import settings

    from whatif.capacity import check, execute_plan
    from whatif.models import CapacityPlan, PlanReplay, ReplayPartState, WhatIfState

    body = {
        "source": "scenario",
        "scenario": scenario(args.teams, args.workloads),
        "targets": [{"queue": "team-0", "percentile": 90, "max_wait": "1h"}],
        "flavors": ["h100"],
        "seeds": args.seeds,
    }
    checked = check(body)
    logs = Path(os.environ["BERTH_DATA_DIR"])
    logs.mkdir(parents=True, exist_ok=True)
    settings.BERTH_REPLAY_SPLIT_MIN = 1
    answers = {}
    walls = {}
    for workers in args.workers:
        settings.BERTH_REPLAY_WORKERS = workers
        # Stored as create_plan stores it, but its task is not sent: this
        # process runs it, as the worker that took it would.
        plan = CapacityPlan.objects.create(
            source="scenario",
            scenario=body["scenario"],
            request=checked.request,
            workloads=checked.count,
        )
        others = start_workers(workers - 1, queue, logs)
        try:
            wait_for_workers(workers - 1, logs)
            started = time.perf_counter()
            state = execute_plan(plan.pk)
            walls[workers] = time.perf_counter() - started
        finally:
            stop(others)
        plan.refresh_from_db()
        if state != WhatIfState.SUCCEEDED:
            raise SystemExit(f"the plan ended {state}: {plan.error}")
        result = plan.result
        answers[workers] = {k: v for k, v in result.items() if k != "seconds"}
        (flavor,) = result["flavors"]
        (answer,) = flavor["answers"]
        print(
            f"\n{workers} worker(s): {plan.workloads:,} workloads, {result['replays']} replays "
            f"asked, answer {answer['gpus']} GPUs (today {flavor['current']}), "
            f"{walls[workers]:.1f} s",
            flush=True,
        )
        rows = PlanReplay.objects.filter(plan=plan)
        if rows.exists():
            by_worker: dict[str, list[float]] = collections.defaultdict(list)
            for row in rows.filter(state=ReplayPartState.DONE):
                by_worker[row.worker].append(row.seconds or 0.0)
            for name, seconds in sorted(by_worker.items()):
                print(f"  {name:<28} {len(seconds):>3} replays, {sum(seconds):6.1f} s")
            ahead = rows.filter(asked=False).count()
            print(f"  replayed ahead and never asked for (dropped ones leave no row): {ahead}")
            if args.timeline:
                began = plan.started_at
                for row in rows.exclude(claimed_at=None).order_by("claimed_at"):
                    start = (row.claimed_at - began).total_seconds()
                    print(
                        f"    {row.gpus:>5} GPUs seed {row.seed}: {row.worker:<20} "
                        f"{start:6.1f} s + {row.seconds or 0:5.1f} s "
                        f"{'asked' if row.asked else 'ahead'} {row.error or row.state}"
                    )
    first = args.workers[0]
    for workers in args.workers[1:]:
        print(f"speed-up, {workers} workers against {first}: ×{walls[first] / walls[workers]:.2f}")
    same = all(answer == answers[first] for answer in answers.values())
    print(f"the same answer, curve and replays with every worker count: {'yes' if same else 'NO'}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    raise SystemExit(main())
