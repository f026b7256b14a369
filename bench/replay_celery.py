"""A month of a 200-team organisation's load (``bench/replay_scale.py``'s
trace) replayed shared out among Celery workers, as a big what-if is
(``whatif.scaleout``): with 1 worker, then 2 (or ``--workers``), printing the
wall time of each and the speed-up.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres \\
    REDIS_URL=redis://127.0.0.1:6379/15 \\
    .venv/bin/python bench/replay_celery.py --workloads 100000 --workers 1 2

With N workers, this process is the run's own worker (it plans the parts,
claims the ones nobody took and merges, as the run's task does) and N - 1
Celery workers (``celery worker --pool=solo`` subprocesses of this checkout,
on a Redis queue of their own) take the others. Everything a real run pays is
in the time: splitting and pickling the parts, storing them in PostgreSQL,
handing figures over at the milestones, sending results back as JSON and
merging them. First it replays the trace in one process, not shared out,
as a run with one worker does (``--no-alone`` skips it). It creates a
scratch database ``berth_bench_<pid>`` and drops it at the end, and checks
every merged result is the one process's. Prints figures; asserts nothing
about time.
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from month_trace import generate, organisation
from org import with_scratch_database
from replay_scale import rss_mib

ROOT = Path(__file__).resolve().parents[1]


def start_workers(count: int, queue: str, logs: Path) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, "BERTH_LOG_LEVEL": "warning", "PYTHONPATH": str(ROOT)}
    workers = []
    for index in range(count):
        argv = [sys.executable, "-m", "celery", "-A", "controlplane", "worker", "--pool=solo"]
        argv += ["--loglevel=WARNING", "--without-gossip", "--without-mingle"]
        argv += ["-n", f"bench-{index + 1}@%h", "-Q", queue]
        with (logs / f"worker-{index + 1}.log").open("ab") as out:
            workers.append(
                subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
            )
    return workers


def broker_queue(script: str) -> str | None:
    """Point this process at REDIS_URL and a queue of its own (returned), as
    the workers it starts will be; all sign with one key. None, said why,
    without REDIS_URL."""
    redis_url = os.environ.get("REDIS_URL", "")
    if not redis_url.startswith("redis"):
        print(f"{script} needs REDIS_URL=redis://… (the workers' broker)", file=sys.stderr)
        return None
    queue = f"berth-bench-{uuid.uuid4().hex[:8]}"
    os.environ.update(
        CELERY_BROKER_URL=redis_url,
        BERTH_CELERY_QUEUE=queue,
        BERTH_SECRET_KEY=os.environ.get("BERTH_SECRET_KEY", "bench-" + "k" * 50),
        BERTH_DEMO_LOAD="false",
        BERTH_RECONCILE_ON_CHANGE="false",
    )
    return queue


def wait_for_workers(count: int, logs: Path) -> None:
    """Until ``count`` Celery workers answer a ping (two minutes at most)."""
    from controlplane.celery import app

    deadline = time.monotonic() + 120
    while len(app.control.ping(timeout=1.0) or []) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"the Celery workers did not answer; see {logs}")


def stop(workers: list[subprocess.Popen[bytes]]) -> None:
    for worker in workers:
        worker.terminate()
    for worker in workers:
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=100_000)
    parser.add_argument("--teams", type=int, default=200)
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--divisions", type=int, default=10, help="root cohorts")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--load", type=float, default=0.85, help="offered / nominal GPUs")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], metavar="N")
    parser.add_argument(
        "--no-alone", dest="alone", action="store_false", help="skip the one-process replay"
    )
    args = parser.parse_args()
    queue = broker_queue("replay_celery.py")
    if queue is None:
        return 2
    print(f"generating {args.workloads:,} workloads ...", flush=True)
    trace = generate(args, lambda done: None)
    policy = organisation(args, trace)
    print(
        f"trace: {len(trace.workloads):,} workloads, {len(policy.cluster_queues)} ClusterQueues, "
        f"{args.divisions} cohort trees; RSS {rss_mib():,.0f} MiB",
        flush=True,
    )
    return with_scratch_database("replay_celery.py", lambda: bench(args, trace, policy, queue))


def bench(args: argparse.Namespace, trace: Any, policy: Any, queue: str) -> None:
    from queues.engine.replay_records import SimulationResult
    from queues.engine.simulator import Simulator
    from whatif.models import ReplayPart, WhatIfRun, WhatIfSource, WhatIfState
    from whatif.scaleout import replay_apart

    logs = Path(os.environ["BERTH_DATA_DIR"])
    logs.mkdir(parents=True, exist_ok=True)
    times: dict[int, float] = {}
    first: SimulationResult | None = None
    alone = None
    if args.alone:
        print("\none process, not shared out (the Simulator on the whole trace)", flush=True)
        started = time.perf_counter()
        copied = pickle.loads(pickle.dumps(trace.workloads))
        alone = Simulator(policy, copied).run()
        alone_seconds = time.perf_counter() - started
        print(f"  wall {alone_seconds:.1f} s, {alone.admissions:,} admissions", flush=True)
    for count in args.workers:
        run = WhatIfRun.objects.create(source=WhatIfSource.SCENARIO, state=WhatIfState.RUNNING)
        workers = start_workers(count - 1, queue, logs)
        try:
            wait_for_workers(count - 1, logs)
            print(f"\n{count} worker(s): this process and {count - 1} Celery worker(s)", flush=True)
            started = time.perf_counter()
            shown = [0]

            def progress(share: float, began: float = started, shown: list[int] = shown) -> None:
                if int(share * 10) > shown[0]:
                    shown[0] = int(share * 10)
                    print(f"  {share:4.0%}  {time.perf_counter() - began:6.1f} s", flush=True)

            _, results = replay_apart(
                run.pk,
                {"replay": policy},
                lambda: trace.workloads,
                {},
                count,
                progress=progress,
            )
            times[count] = time.perf_counter() - started
        finally:
            stop(workers)
        result = results["replay"]
        for part in ReplayPart.objects.filter(run=run):
            print(
                f"  part {part.index}: {part.worker:<28} {len(part.groups):>2} cohort trees, "
                f"{part.workloads:>9,} workloads, {part.seconds or 0:6.1f} s"
            )
        print(
            f"  wall {times[count]:.1f} s, {result.admissions:,} admissions "
            f"({result.admissions / times[count]:,.0f}/s), RSS here {rss_mib():,.0f} MiB",
            flush=True,
        )
        if alone is not None and (result.records, result.totals) != (alone.records, alone.totals):
            raise SystemExit(f"{count} workers gave another result than one process")
        if first is None:
            first = result
        elif (result.records, result.totals, result.admissions) != (
            first.records,
            first.totals,
            first.admissions,
        ):
            raise SystemExit(f"{count} workers gave another result than {args.workers[0]}")
    base = times[args.workers[0]]
    print()
    if alone is not None:
        print(f"one process, not shared out: {alone_seconds:6.1f} s")
    for count, seconds in times.items():
        print(f"workers {count}: {seconds:6.1f} s   speed-up x{base / seconds:.2f}")
    print("same merged result with every worker count" + (" and in one process" if alone else ""))


if __name__ == "__main__":
    raise SystemExit(main())
