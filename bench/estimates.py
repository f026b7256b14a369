"""How good are Berth's start estimates? Measured on the embedded demo.

Runs the demo organisation on the simulated cluster the way ``make run`` does
(its load generator, the simulated Kueue at BERTH_SIMULATED_SPEEDUP, sync
into Postgres every step), on a virtual clock. For every job the load submits
while it measures, it asks what a team would ask:

- the dry run (``forecast_new``, as ``berth submit --dry-run`` does) just
  before the job is created: fits now, and the start range;
- ``berth why`` (``forecast_existing``) once sync first saw its workload
  pending;

then runs on until the jobs have started (or the drain ends) and compares with
when each was really admitted (its first Admitted event). It prints:

- inside: the share of jobs admitted inside their range (goal ≥ 80 %), one
  step of the cluster allowed either side (it admits only when it steps);
- the median and p90 error of the range's midpoint;
- "fits now: yes" right: the share of those admitted within one step
  (goal ≥ 95 %);
- unknown: the share answered with no start at all (goal ≤ 5 %).

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/estimates.py

The demo's ``h100-ondemand`` names its ``gpu-racks`` Topology, so gangs there
are placed node by node; ``--no-topology`` seeds it without (judged by quota
alone), for comparison.

``--warmup`` and ``--measure`` are minutes of the cluster's (real) time,
``--drain`` how long it runs on for the measured jobs to start. It creates a
scratch database ``berth_bench_<pid>`` and drops it at the end. Prints
figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from org import with_scratch_database


@dataclass
class Clock:
    """Django's clock, moved by the bench: the simulated cluster stamps
    objects with it, sync and the forecasts read it."""

    at: datetime

    def now(self) -> datetime:
        return self.at


@dataclass
class Asked:
    """What Berth answered about one job, and when it really started."""

    submitted: datetime
    dry_fits: bool = False
    # Where the dry run put it: its ClusterQueue and place in line.
    dry_place: str = ""
    dry: tuple[datetime | None, datetime | None] = (None, None)
    why: tuple[datetime | None, datetime | None] | None = None
    admitted: datetime | None = None
    workload: str = ""
    notes: list[str] = field(default_factory=list)


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


def judge(
    answers: list[tuple[datetime, tuple[datetime | None, datetime | None], datetime | None]],
    end: datetime,
    step: float,
) -> dict[str, Any]:
    """answers: (asked at, (earliest, latest), admitted). A job never admitted
    by ``end`` is inside if its range reaches past ``end``; its midpoint error
    is at least ``end`` − midpoint (counted as that)."""
    inside = unknown = early = late = 0
    errors: list[float] = []
    slack = timedelta(seconds=step)
    for _asked, (earliest, latest), admitted in answers:
        if earliest is None or latest is None:
            unknown += 1
            continue
        actual = admitted or end
        middle = earliest + (latest - earliest) / 2
        errors.append(abs((actual - middle).total_seconds()))
        if admitted is not None and admitted < earliest - slack:
            early += 1
        elif (admitted or end) > latest + slack and (admitted is not None or latest + slack < end):
            late += 1
        else:
            inside += 1
    known = len(answers) - unknown
    return {
        "jobs": len(answers),
        "inside": inside / known if known else None,
        "early": early,
        "late": late,
        "unknown": unknown / len(answers) if answers else None,
        "median_error": percentile(errors, 50),
        "p90_error": percentile(errors, 90),
    }


def run(args: argparse.Namespace) -> None:
    from io import StringIO

    from django.conf import settings
    from django.core.management import call_command
    from django.utils import timezone

    from cluster.forecast import Candidate, forecast_existing, forecast_new, kueue_pod_sets
    from cluster.forecast import pod_sets_of as engine_pod_sets
    from cluster.models import EventType, WorkloadEvent, WorkloadRecord, WorkloadState
    from cluster.snapshots import record_nodes
    from cluster.sync import watch_workloads
    from queues.backends.base import TYPES
    from queues.backends.simulated import SimulatedBackend
    from queues.models import ReconcileRun
    from queues.reconcile import reconcile
    from queues.simulation.kueue import PRIORITY_LABEL, QUEUE_LABEL, SimulatedKueue
    from queues.simulation.load import generate
    from queues.simulation.nodes import ensure_nodes

    speedup, step = args.speedup, args.step
    settings.BERTH_CLUSTER = "simulated"
    settings.BERTH_SIMULATED_SPEEDUP = speedup
    settings.BERTH_DEMO_LOAD = False
    settings.BERTH_RECONCILE_RETRY_BASE = 0.001
    start = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    clock = Clock(start)
    timezone.now = clock.now  # type: ignore[assignment]
    if args.no_topology:
        from queues import demo_org

        demo_org.FLAVORS = [
            {k: v for k, v in flavor.items() if k != "topology_name"} for flavor in demo_org.FLAVORS
        ]
    call_command("seed_demo", "--quiet-logins", stdout=StringIO())
    backend = SimulatedBackend()
    reconcile(backend, trigger=ReconcileRun.Trigger.MANUAL)
    ensure_nodes(backend)
    kueue = SimulatedKueue(backend, speedup)
    rng = random.Random(args.seed)
    measure_from = start + timedelta(minutes=args.warmup)
    measure_until = measure_from + timedelta(minutes=args.measure)
    end = measure_until + timedelta(minutes=args.drain)
    local_queues = {
        (q["metadata"]["namespace"], q["metadata"]["name"]): q["spec"]["clusterQueue"]
        for q in backend.list(TYPES["LocalQueue"])[0]
    }
    seen: set[tuple[str, str]] = set()
    asked: dict[tuple[str, str], Asked] = {}
    steps = int((end - start).total_seconds() / step)
    began = time.perf_counter()
    print(
        f"demo load at {speedup:g}x, a step every {step:g} s: {args.warmup} min warm-up, "
        f"{args.measure} min measured, {args.drain} min drain ({steps} steps)",
        flush=True,
    )
    for index in range(steps):
        clock.at += timedelta(seconds=step)
        now = clock.at.timestamp()
        generate(backend, now, step * speedup, rng)
        measuring = measure_from <= clock.at < measure_until
        for job in backend.list(TYPES["Job"])[0]:
            meta = job["metadata"]
            key = (meta["namespace"], meta["name"])
            if key in seen:
                continue
            seen.add(key)
            if not measuring:
                continue
            queue = meta.get("labels", {}).get(QUEUE_LABEL, "")
            cluster_queue = local_queues.get((meta["namespace"], queue), queue)
            priority_class = meta.get("labels", {}).get(PRIORITY_LABEL)
            candidate = Candidate(
                name=meta["name"],
                namespace=meta["namespace"],
                cluster_queue=cluster_queue,
                priority=_priority(priority_class),
                pod_sets=engine_pod_sets(kueue_pod_sets(job)),
            )
            forecast = forecast_new(candidate, clock.at)
            asked[key] = Asked(
                clock.at,
                forecast.fits_now,
                dry_place=f"{cluster_queue} #{forecast.position}",
                dry=(forecast.earliest_start, forecast.latest_start),
            )
        kueue.tick(now)
        backend.prune_log()
        watch_workloads(backend, timeout_seconds=0, rounds=1)
        # The nodes, as sync's snapshot step keeps them (estimates place gangs
        # on them where a flavor is topology-aware).
        record_nodes(backend.list(TYPES["Node"])[0], clock.at)
        waiting = {k for k, a in asked.items() if a.why is None}
        if waiting:
            for row in WorkloadRecord.objects.filter(
                job_name__in=[name for _, name in waiting]
            ).only("namespace", "name", "job_name", "state"):
                entry = asked.get((row.namespace, row.job_name))
                if entry is None or entry.why is not None:
                    continue
                entry.workload = f"{row.namespace}/{row.name}"
                if row.state == WorkloadState.PENDING:
                    found = forecast_existing(entry.workload, clock.at)
                    if found is not None:
                        entry.why = (found.earliest_start, found.latest_start)
                else:  # admitted before sync first saw it pending: nothing to ask
                    entry.why = (None, None)
                    entry.notes.append("admitted at once")
        if index % max(1, steps // 20) == 0:
            print(
                f"  {100 * index // steps:3d}%  {clock.at:%H:%M:%S}  {len(asked)} jobs asked  "
                f"({time.perf_counter() - began:.0f} s)",
                flush=True,
            )
    first: dict[str, datetime] = {}
    events = WorkloadEvent.objects.filter(type=EventType.ADMITTED).order_by("at")
    for namespace, name, at in events.values_list("workload__namespace", "workload__name", "at"):
        first.setdefault(f"{namespace}/{name}", at)
    for entry in asked.values():
        entry.admitted = first.get(entry.workload)
    report(list(asked.values()), end, step, time.perf_counter() - began, args.verbose)


def _priority(priority_class: str | None) -> int:
    from queues.models import WorkloadPriorityClass

    if not priority_class:
        return 0
    found = WorkloadPriorityClass.objects.filter(name=priority_class).values_list(
        "value", flat=True
    )
    return int(found.first() or 0)


def _still(key: str) -> str:
    """What sync last saw of a workload that never started."""
    from cluster.models import WorkloadRecord

    namespace, name = key.split("/", 1)
    row = WorkloadRecord.objects.filter(namespace=namespace, name=name).first()
    if row is None:
        return "not recorded"
    from cluster.forecast import forecast_existing

    now = forecast_now()
    found = forecast_existing(key, now)
    said = ""
    if found is not None and found.earliest_start and found.latest_start:
        said = (
            f"; now Berth says +{(found.earliest_start - now).total_seconds():.0f}.."
            f"+{(found.latest_start - now).total_seconds():.0f} s, position {found.position}"
        )
    return f"{row.state} {row.requested} {row.reason}: {row.message[:160]}{said}"


def forecast_now() -> datetime:
    from django.utils import timezone

    return timezone.now()


def report(
    entries: list[Asked], end: datetime, step: float, seconds: float, verbose: bool = False
) -> None:
    def show(value: float | None, kind: str) -> str:
        if value is None:
            return "—"
        return f"{100 * value:.0f}%" if kind == "share" else f"{value:.0f} s"

    dry = judge([(e.submitted, e.dry, e.admitted) for e in entries], end, step)
    asked_why = [e for e in entries if e.why is not None and "admitted at once" not in e.notes]
    why = judge([(e.submitted, e.why or (None, None), e.admitted) for e in asked_why], end, step)
    said_fits = [e for e in entries if e.dry_fits]
    right = sum(
        1
        for e in said_fits
        if e.admitted is not None and (e.admitted - e.submitted).total_seconds() <= 2 * step
    )
    waited = [(e.admitted - e.submitted).total_seconds() for e in entries if e.admitted]
    print()
    print(f"{len(entries)} jobs measured in {seconds:.0f} s; {len(waited)} admitted by the end")
    print(
        f"waits: p50 {show(percentile(waited, 50), 's')}, p90 {show(percentile(waited, 90), 's')}"
    )
    print(
        f"{'answer':<10} {'jobs':>5} {'inside':>7} {'early':>6} {'late':>5} {'unknown':>8} "
        f"{'mid err p50':>12} {'p90':>7}"
    )
    for label, figures in (("dry run", dry), ("berth why", why)):
        print(
            f"{label:<10} {figures['jobs']:>5} {show(figures['inside'], 'share'):>7} "
            f"{figures['early']:>6} {figures['late']:>5} "
            f"{show(figures['unknown'], 'share'):>8} "
            f"{show(figures['median_error'], 's'):>12} {show(figures['p90_error'], 's'):>7}"
        )
    if verbose:
        print("berth why answers the job started outside of:")
        for e in asked_why:
            earliest, latest = e.why or (None, None)
            if earliest is None or latest is None:
                continue
            actual = e.admitted or end
            slack = timedelta(seconds=step)
            if earliest - slack <= actual <= latest + slack:
                continue
            print(
                f"  {e.workload:<40} asked {e.submitted:%H:%M:%S} range "
                f"+{(earliest - e.submitted).total_seconds():.0f}..+"
                f"{(latest - e.submitted).total_seconds():.0f} s, started "
                + (
                    f"+{(e.admitted - e.submitted).total_seconds():.0f} s"
                    if e.admitted
                    else "never"
                )
            )
            if e.admitted is None:
                print(f"    {_still(e.workload)}")
    if verbose:
        print(f"fits now: yes, but not admitted within {2 * step:g} s:")
        for e in said_fits:
            if e.admitted is not None and (e.admitted - e.submitted).total_seconds() <= 2 * step:
                continue
            waited_for = (
                f"+{(e.admitted - e.submitted).total_seconds():.0f} s" if e.admitted else "never"
            )
            print(
                f"  {e.workload:<40} {e.dry_place:<20} asked {e.submitted:%H:%M:%S}, {waited_for}"
            )
    share = right / len(said_fits) if said_fits else None
    print(
        f"fits now: yes for {len(said_fits)} jobs, admitted within {2 * step:g} s: "
        f"{show(share, 'share')}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warmup", type=int, default=10, help="minutes before measuring")
    parser.add_argument("--measure", type=int, default=20, help="minutes of submissions asked")
    parser.add_argument("--drain", type=int, default=20, help="minutes after, for them to start")
    parser.add_argument("--step", type=float, default=2.0, help="seconds between cluster steps")
    parser.add_argument("--speedup", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--verbose", action="store_true", help="list the misses")
    parser.add_argument(
        "--no-topology",
        action="store_true",
        help="seed h100-ondemand without its Topology (placement by quota alone)",
    )
    args = parser.parse_args()
    return with_scratch_database("bench/estimates.py", lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
