"""How long does a capacity plan take on a month of the demo organisation's load?

Seeds the demo organisation (``seed_demo``: 48 on-demand H100s on 6 nodes of
the ``gpu-racks`` topology, 16 spot on 2 nodes; research, serving, platform
and urgent-release) in a scratch database, records its nodes as sync does,
and writes a month of its load as sync would have recorded it: the demo load
generator's shape (``queues.simulation.load``: 6 jobs an hour per team
namespace, Poisson; 1-16 GPUs, mostly 1; lognormal runtimes of median 15 min
and mean 1 h, at most 12 h; 2 % to urgent-release), each workload finished
after its runtime. Then it plans as the worker does (``whatif.capacity``:
check, build the window's stream from the records, search) for the p90 wait
of ``training-large`` under 1 h (``--target``), every flavor with GPU quota,
``--seeds`` seeds, ``--growth``, and prints the time of each part, the
replays and the answers.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/capacity.py
    ... bench/capacity.py --days 30 --seeds 3 --growth 1.3

It creates a scratch database ``berth_bench_<pid>`` and drops it at the end.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from org import with_scratch_database

GPU = "nvidia.com/gpu"
TEAM_QUEUES = {"research": "research", "serving": "serving", "platform": "platform"}


def pod_sets(gpus: int, spot: bool) -> list[dict[str, Any]]:
    per_pod = min(gpus, 8)
    return [
        {
            "name": "main",
            "count": math.ceil(gpus / per_pod),
            "requests": {
                "cpu": 24_000 * per_pod,
                "memory": 256 * 2**30 * per_pod,
                GPU: per_pod,
            },
            "tolerations": (
                [{"key": "berth.dev/spot", "operator": "Exists", "effect": "NoSchedule"}]
                if spot
                else []
            ),
        }
    ]


def write_month(start: datetime, days: float, seed: int) -> int:
    """The demo load of ``days`` from ``start``, as WorkloadRecords."""
    from cluster.models import WorkloadRecord, WorkloadState
    from queues.simulation import load

    rng = random.Random(seed)
    rows = []
    for namespace, queue in TEAM_QUEUES.items():
        at = start
        end = start + timedelta(days=days)
        while True:
            at += timedelta(seconds=rng.expovariate(load.JOBS_PER_HOUR / 3600))
            if at >= end:
                break
            gpus = rng.choices(*load.GPU_CHOICES)[0]
            runtime = load._runtime(rng)
            target = "urgent-release" if rng.random() < load.URGENT_SHARE else queue
            priority = {"research": 0, "serving": 1000, "platform": 0}.get(target, 100000)
            finished = at + timedelta(seconds=runtime)
            rows.append(
                WorkloadRecord(
                    uid=f"bench-{namespace}-{len(rows)}",
                    namespace=namespace,
                    name=f"job-{len(rows)}",
                    local_queue=target,
                    cluster_queue=target,
                    priority=priority,
                    priority_class="train-low" if target == "serving" else "",
                    requested={GPU: gpus},
                    pod_sets=pod_sets(gpus, spot=target == "serving"),
                    state=WorkloadState.FINISHED,
                    created_at=at,
                    admitted_at=at,
                    finished_at=finished,
                )
            )
    WorkloadRecord.objects.bulk_create(rows, batch_size=2000)
    return len(rows)


def run(args: argparse.Namespace) -> None:
    from io import StringIO

    from django.conf import settings
    from django.core.management import call_command

    from cluster.snapshots import record_nodes
    from queues.backends.base import TYPES
    from queues.backends.simulated import SimulatedBackend
    from queues.models import ReconcileRun
    from queues.reconcile import reconcile
    from queues.simulation.nodes import ensure_nodes
    from whatif.capacity import check, run_search

    settings.BERTH_CLUSTER = "simulated"
    settings.BERTH_SIMULATED_SPEEDUP = 1.0  # the month's runtimes are real seconds
    settings.BERTH_DEMO_LOAD = False
    settings.BERTH_RECONCILE_RETRY_BASE = 0.001
    call_command("seed_demo", "--quiet-logins", stdout=StringIO())
    backend = SimulatedBackend()
    reconcile(backend, trigger=ReconcileRun.Trigger.MANUAL)
    ensure_nodes(backend)
    end = datetime.now(UTC).replace(microsecond=0)
    start = end - timedelta(days=args.days)
    record_nodes(backend.list(TYPES["Node"])[0], end)
    began = time.perf_counter()
    count = write_month(start, args.days, args.seed)
    written = time.perf_counter() - began
    queue, percentile, wait = args.target.split(":")
    body = {
        "window_start": start.isoformat(),
        "window_end": end.isoformat(),
        "targets": [{"queue": queue, "percentile": float(percentile), "max_wait": wait}],
        "seeds": args.seeds,
        "growth": args.growth,
    }
    if args.flavor:
        body["flavors"] = args.flavor
    began = time.perf_counter()
    checked = check(body, now=end)
    checking = time.perf_counter() - began
    progress: list[tuple[float, int, int]] = []
    began, cpu = time.perf_counter(), time.process_time()
    result = run_search(
        checked, lambda done, total: progress.append((time.perf_counter(), done, total))
    )
    searching, cpu = time.perf_counter() - began, time.process_time() - cpu
    print(
        f"{count:,} workloads over {args.days:g} days written in {written:.1f} s; "
        f"checked in {checking:.2f} s"
    )
    print(
        f"plan: p{percentile} of {queue} <= {wait}, {args.seeds} seed(s), growth x{args.growth:g}: "
        f"{searching:.1f} s ({cpu:.1f} s of CPU) for {result['replays']} replays "
        f"({searching / max(result['replays'], 1):.1f} s each) of {result['workloads']:,} workloads"
    )
    if args.cli:
        show_as_cli(result, body)
    for flavor in result["flavors"]:
        answers = ", ".join(
            f"{a['group']} p{a['percentile']:g} <= {a['max_wait'] / 60:g} min: "
            + (
                f"{a['gpus']} GPUs ({a['change']:+d})"
                if a["gpus"] is not None
                else "not used by its queues"
                if a["served"] is False
                else f"more than {a['tried_up_to']} GPUs"
            )
            for a in flavor["answers"]
        )
        points = [
            f"{p['gpus']}"
            + (
                f" ({_minutes(p['groups'][queue]['median'])}"
                + (" or more" if p["groups"][queue]["at_least"] else "")
                + ")"
                if queue in p["groups"]
                else ""
            )
            for p in flavor["curve"]
        ]
        print(
            f"  {flavor['flavor']}: today {flavor['current']} GPUs, "
            f"node {flavor['node_gpus']}; {answers}"
        )
        print(f"    replayed at: {', '.join(points)}")


def show_as_cli(result: dict[str, Any], body: dict[str, Any]) -> None:
    """The plan as ``berth plan show`` prints it (for docs/cli.md)."""
    from berth_cli.plan import plan_lines

    plan = {"id": 1, "state": "succeeded", "seeds": body["seeds"], "growth": body["growth"]}
    for line in plan_lines({**plan, "workloads": result["workloads"], "result": result}):
        print(line)


def _minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 60:.0f} min"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--growth", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1, help="of the generated month")
    parser.add_argument(
        "--target", default="training-large:90:1h", help="queue:percentile:longest wait"
    )
    parser.add_argument("--flavor", action="append", help="a flavor to size (default: every one)")
    parser.add_argument("--cli", action="store_true", help="also print it as berth plan shows it")
    args = parser.parse_args()
    return with_scratch_database("bench/capacity.py", lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
