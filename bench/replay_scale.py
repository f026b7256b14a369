"""A month of a 200-team organisation replayed through the engine, by default in one process.

    .venv/bin/python bench/replay_scale.py                          # about 1,000,000 workloads
    .venv/bin/python bench/replay_scale.py --workloads 200000
    .venv/bin/python bench/replay_scale.py --workloads 200000 --profile /tmp/replay.prof
    .venv/bin/python bench/replay_scale.py --teams 200 --days 30 --divisions 10 --seed 1 \\
        --load 0.85 [--together] [--tracemalloc] [--max-rss-gib 8]

The organisation: ``--teams`` teams in ``--divisions`` root cohorts (independent
quota trees). Each team has one ClusterQueue per team queue class
(interactive-dev, training-large, eval-batch) and each division one shared
urgent-release queue, rendered from ``queues.queue_class_templates`` by
``queues.kueue.render`` as Berth renders them (strategy, preemption, the
approval check) and read by the engine's scenario reader. Flavors, priority
classes and quota shapes are ``queues.demo_org``'s: h100-ondemand and
h100-spot (its topology left out: no nodes, quota only, as Kueue's perf
scenarios), 24 cores and 256 GiB per GPU, eval-batch quota a third on-demand
and two thirds spot and the only class tolerating spot, eval-batch at
train-low (1,000) and urgent-release at train-high (100,000), the others at 0.
Each queue's nominal GPUs are its own offered load divided by ``--load``; it
may borrow as much again (at least enough for its largest job), urgent-release
nothing, as in the demo.

The trace, from ``../shared/TRACES.md``:
- run times lognormal with a published median and mean per class (sigma =
  sqrt(2 ln(mean/median))): interactive-dev Acme-Seren 2023 (122 s / 23.6 min),
  eval-batch Alibaba PAI 2020 (481 s / 1.33 h), training-large Microsoft Philly
  2017 (874 s / 5.0 h); urgent-release the demo-day scenario's releases (1 h /
  2 h). Each is cut at its queue class's max_runtime_seconds (the job's
  activeDeadlineSeconds ends it). The published figures are over all jobs,
  failed ones included, so failures are in the run times; their retries are
  not generated (when a job fails depends on the replay).
- GPUs per job: median 1, mean 3.7 over the mix, as Helios 2020 (3.72 / 1):
  47% interactive-dev (1/2/4/8 GPUs at 80/12/6/2%), 41.9% eval-batch (70/15/10/5%),
  11% training-large gangs of 8-GPU pods (8/16/32/64 at 40/30/20/10%), 0.1%
  urgent-release (4 or 8).
- arrivals: Poisson with the diurnal and weekly cycles Philly and Helios show
  (amplitudes not published; assumed: 1 + 0.6 cos(2 pi (hour - 15) / 24), weekends
  at 0.45), spread over teams by a Zipf-like size (rank^-0.7, shuffled).
- the published queue waits (medians 0-189 s, means 3.6-62.7 min) are printed
  beside the replay's for comparison; ``--load`` moves them.
Checkpoints as the demo-day scenario: training-large 900 s, eval-batch 300 s,
urgent-release 600 s. Every workload is generated with its own pod set, as a
what-if replay of recorded workloads builds them; the engine shares the pod
sets of workloads that ask alike (``model.shared_pod_sets``), for both.

Prints the trace's size and shape, generation time, the replay's wall time and
admissions per second, the cycles by what they showed (changed something;
changed nothing but told a head something new; told every head as before,
the last of each event time: ``Settler``'s counts; and the unparkings whose
parked heads were told again where they were, ``queues.engine.unparking``,
with the cycles counted for them, not run; and the last cycles counted, not
run, where the one before left quiet every tree they would visit:
``Settler.confirm_unasked``), the heads nominated
afresh per queue class against the
answers reused, those reused with their figures read again and those read
again once their own queue's usage had moved (where most of the time
goes; summed from the workers with ``--workers``), the StrictFIFO heads left standing in
their queues (told again, not popped), the victim searches that ended as
hopeless without walking their candidates and those that found their victims
in first steps read in order without gathering every candidate
(``queues.engine.first_candidates``), the reused answers whose hopeless
searches were asked again and how many of those were known to hold from
the tree's usage alone (``preemption.hopeless_as_used``), resident memory
after each phase and at its peak (``ru_maxrss``), and per queue class the
workloads, admitted, p50 / p90 / mean wait and preemptions suffered.
``--tracemalloc`` (slow) also prints what holds the memory at the end of the
replay. ``--profile FILE`` runs the replay (not the
generation) under cProfile, saves the stats to FILE and prints the top 25
functions by tottime and by cumtime. ``--cycle-times`` times every cycle
and prints the seconds each kind took and their cost each (with
``--workers``, the workers' seconds summed, which can exceed the wall time;
the timing adds a little to every cycle, so compare timed runs with timed
runs). ``--so-far SECONDS`` replays as a what-if
run does for its page: every SECONDS or so (never more often than four times
what the last reading took) it prints the figures so far and what reading
them cost (the trees at once). By default the process replays its independent
cohort trees one after another (``tree_by_tree.py``: each tree on its own
simulator, let go once done, the results merged into the one the whole replay
gives, ``tests/engine/test_split.py``), printing a line a tree: 29% less time
on the million, though only 3.7% fewer instructions (one tree's state stays in the
caches, ten trees' do not, we infer: measured on 50,000 workloads in ten
trees). Tree after tree, the replay's set-up is the split, and each tree's
simulator is made in its run. ``--together`` replays every tree at once in
one simulator, with the same answers. ``--workers N`` shares the trees out
among N forked worker processes, biggest first, each replaying one tree
after another as the one process does, and merges the results (the same
result as one process gives: ``tests/engine/test_split.py``); it prints a
line a tree as it begins and as it comes back, the merge's time and the
largest worker's peak, resident and its own (the pages no other process
maps), and a tree that fails (past the memory cap, say) stops every
worker. ``--as-part``
replays the trees as one what-if part does (``queues.engine.parts``:
each tree to a milestone in turn, figures taken there), printing
a line a milestone. Progress goes to stdout as it runs.
Pure engine: no Django, no database. Prints figures; asserts nothing. It says
first whether the engine runs compiled (``make install`` compiles it with
mypyc) or as pure Python; ``BERTH_PURE_ENGINE=1`` compares the two.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import math
import os
import pstats
import resource
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from month_trace import (  # noqa: E402
    DAY,
    GPU,
    HOUR,
    LOADS,
    generate,
    organisation,
)
from tree_by_tree import (  # noqa: E402
    replay_as_part,
    replay_trees,
    replay_trees_in_processes,
    say,
)

import queues.engine  # noqa: E402
from queues.display import duration  # noqa: E402
from queues.engine.lockstep import replay_together  # noqa: E402
from queues.engine.metrics import percentile, summarize  # noqa: E402
from queues.engine.model import Workload  # noqa: E402
from queues.engine.replay_records import Frame, frame_of  # noqa: E402
from queues.engine.scheduler import Scheduler  # noqa: E402
from queues.engine.settling import Settler  # noqa: E402
from queues.engine.simulator import SimulationResult, Simulator  # noqa: E402
from queues.engine.split import GroupReplay, group_replays  # noqa: E402

# Published queue waits (TRACES.md), median s / mean min, to read the replay's against.
PUBLISHED_WAITS = "Philly 189 s / 62.7 min, Helios 0 s / 14.4 min, PAI 9 s / 6.7 min"


def rss_mib() -> float:
    """Resident memory now (ru_maxrss only gives the peak)."""
    with Path("/proc/self/statm").open() as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Progress:
    """Prints every 5% of the workloads finished, or every 15 s when slower
    (only every 15 s without ``by_share``: a tree of many, whose end prints its
    own line); stops the run past the memory cap."""

    def __init__(
        self,
        simulator: Simulator,
        started: float,
        cap_mib: float,
        *,
        label: str = "replay",
        by_share: bool = True,
    ) -> None:
        self.simulator = simulator
        self.started = started
        self.cap_mib = cap_mib
        self.label = label
        self.by_share = by_share
        self.next_mark = 0 if by_share else sys.maxsize
        self.next_print = 0.0 if by_share else time.perf_counter() - started + 15

    def __call__(self, done: int, total: int) -> None:
        # Called at every completion: keep the common case to two comparisons.
        elapsed = time.perf_counter() - self.started
        if done < self.next_mark and elapsed < self.next_print:
            return
        if self.by_share:
            self.next_mark = done + max(1, total // 20)
        self.next_print = elapsed + 15
        rss = within_cap(self.cap_mib)
        say(  # one write: a worker process's progress prints beside others'
            f"  {self.label} {100 * done / total:5.1f}%  {done:>9,}/{total:,} finished  "
            f"sim day {self.simulator.scheduler.now / DAY:5.1f}  "
            f"{self.simulator.admissions:>9,} admissions  {elapsed:7.1f} s  RSS {rss:,.0f} MiB"
        )


def within_cap(cap_mib: float) -> float:
    """The resident MiB; stops the run past the memory cap."""
    rss = rss_mib()
    if rss > cap_mib:
        raise SystemExit(f"stopped: resident memory {rss:,.0f} MiB is past the cap")
    return rss


class SoFar:
    """Prints the figures of the part replayed so far, as the what-if page gets
    them (``summarize`` of a snapshot: waits censored where the replay is), and
    what reading them took."""

    def __init__(self, simulator: Simulator, started: float) -> None:
        self.simulator = simulator
        self.started = started
        self.readings = 0
        self.cost = 0.0

    def __call__(self, at: float) -> None:
        began = time.perf_counter()
        summary = summarize(self.simulator.snapshot(at))
        took = time.perf_counter() - began
        self.readings += 1
        self.cost += took
        waits = "  ".join(
            f"{name} p95 {_censored(figures['time_to_admission'], 'p95')}"
            for name, figures in summary["classes"].items()
        )
        print(
            f"  so far at {began - self.started:6.1f} s: sim day {at / DAY:5.1f}, "
            f"{summary['workloads']:,} arrived, {summary['admissions']:,} admissions; {waits}; "
            f"read in {took:.2f} s ({self.readings} readings, {self.cost:.1f} s in all)",
            flush=True,
        )


def _censored(stats: dict[str, Any], key: str) -> str:
    value = stats.get(key)
    if value is None:
        return "-"
    return f"{'>=' if key in stats.get('at_least', []) else ''}{duration(value)}"


def cycle_figures(settler: Settler) -> str:
    """The cycles by what they showed: most change nothing, each event time
    ending with one that tells every head what it was told before; timed
    (``--cycle-times``), the seconds each kind took."""
    total = settler.changing_cycles + settler.telling_cycles + settler.confirming_cycles
    figures = (
        f"cycles {total:,}: changed something {settler.changing_cycles:,}, changed nothing "
        f"but told a head something new {settler.telling_cycles:,}, told every head as "
        f"before (the last of an event time) {settler.confirming_cycles:,}; "
        f"{settler.unparked_in_place:,} unparkings told their parked heads again where they "
        f"were, {settler.cycles_in_place:,} of those cycles counted, not run; "
        f"{settler.confirmed_unasked:,} last cycles of an event time counted, not run, "
        f"the one before having left every tree it would visit quiet"
    )
    if not settler.timed:
        return figures
    kinds = (
        ("changing", settler.changing_cycles, settler.changing_seconds),
        ("telling", settler.telling_cycles, settler.telling_seconds),
        ("confirming", settler.confirming_cycles, settler.confirming_seconds),
    )
    timed = ", ".join(
        f"{kind} {seconds:.1f} s ({1e6 * seconds / count:.1f} µs each)"
        if count
        else f"{kind} 0.0 s"
        for kind, count, seconds in kinds
    )
    return f"{figures}\ncycle times: {timed}"


def nomination_figures(scheduler: Scheduler, result: SimulationResult) -> str:
    """Where a replay's time mostly goes: the heads nominated afresh, per
    queue class, against the answers reused (as they were, or with their
    figures read again, and of them those read again once their own queue's
    usage had moved), the StrictFIFO heads left standing (and of them,
    those told with their tree's block); and the victim
    searches that ended without walking
    their candidates, no walk able to free enough."""
    class_of = {r.cluster_queue: r.workload_class for r in result.records.values()}
    fresh: dict[str, int] = {}
    for queue, count in scheduler.nominated.items():
        name = class_of.get(queue, "?")
        fresh[name] = fresh.get(name, 0) + count
    total = sum(fresh.values())
    per_class = ", ".join(
        f"{name} {count:,}" for name, count in sorted(fresh.items(), key=lambda kv: -kv[1])
    )
    return (
        f"nominations {total:,} ({per_class}); answers reused {scheduler.reused:,}, "
        f"reused with their figures read again {scheduler.refreshed:,}, "
        f"read again once their own queue's usage had moved "
        f"{scheduler.read_after_own_usage_moved:,}; "
        f"StrictFIFO heads left standing (not popped) {scheduler.left_standing:,}, told "
        f"with their tree's block (not asked) {scheduler.told_with_block:,}, "
        f"{scheduler.told_over_ranges:,} of them once quota had moved there "
        f"({scheduler.searches_told_over_ranges:,} with hopeless victim searches); "
        f"victim searches ended as hopeless {scheduler.hopeless:,}, that found their "
        f"victims in first steps read in order {scheduler.found_in_order:,}; "
        f"reused answers' hopeless "
        f"searches asked again {scheduler.hopeless_asked_again:,}, known to hold from usage "
        f"alone {scheduler.hopeless_as_used:,}"
    )


def _wait(seconds: float) -> str:
    """A wait as the pages show it; "-" for a class nothing of was admitted."""
    return "-" if math.isnan(seconds) else duration(seconds)


def class_figures(result: SimulationResult) -> list[tuple[str, int, int, float, float, float, int]]:
    waits: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    preempted: dict[str, int] = {}
    for record in result.records.values():
        name = record.workload_class
        counts[name] = counts.get(name, 0) + 1
        preempted[name] = preempted.get(name, 0) + record.preemptions
        wait = record.wait
        if wait is not None:
            waits.setdefault(name, []).append(wait)
    rows = []
    for load in LOADS:
        values = sorted(waits.get(load.name, []))
        rows.append(
            (
                load.name,
                counts.get(load.name, 0),
                len(values),
                percentile(values, 50),
                percentile(values, 90),
                sum(values) / len(values) if values else math.nan,
                preempted.get(load.name, 0),
            )
        )
    return rows


def trace_shape(workloads: list[tuple[Workload, str]]) -> str:
    gpus = sorted(float(sum(p.count * p.requests[GPU] for p in w.pod_sets)) for w, _ in workloads)
    runtimes = sorted(w.runtime or 0.0 for w, _ in workloads)
    return (
        f"GPUs per job mean {sum(gpus) / len(gpus):.2f} / median {percentile(gpus, 50):.0f} "
        f"(max {gpus[-1]:.0f}); run time median {percentile(runtimes, 50):.0f} s / "
        f"mean {sum(runtimes) / len(runtimes) / HOUR:.2f} h"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=1_000_000)
    parser.add_argument("--teams", type=int, default=200)
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--divisions", type=int, default=10, help="root cohorts")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--load", type=float, default=0.85, help="offered / nominal GPUs")
    parser.add_argument("--profile", metavar="FILE", help="cProfile the replay, stats to FILE")
    parser.add_argument("--tracemalloc", action="store_true", help="what holds memory (slow)")
    parser.add_argument("--max-rss-gib", type=float, default=8.0)
    parser.add_argument(
        "--workers",
        type=int,
        default=0,
        metavar="N",
        help="replay the independent cohort trees apart, in N processes, and merge them",
    )
    parser.add_argument(
        "--together",
        action="store_true",
        help="replay every tree at once in one simulator, not one tree after another",
    )
    parser.add_argument(
        "--as-part",
        action="store_true",
        help="replay the trees as one what-if part does: each to a milestone in turn, "
        "figures taken at each milestone (queues.engine.parts.replay_part)",
    )
    parser.add_argument(
        "--cycle-times",
        action="store_true",
        help="time each cycle and print the seconds each kind took (summed over workers)",
    )
    parser.add_argument(
        "--so-far",
        type=float,
        metavar="SECONDS",
        help="print the figures so far about every SECONDS, as a what-if run stores them "
        "(the trees at once, as --together)",
    )
    args = parser.parse_args()
    if args.workers < 0:
        parser.error("--workers: a number of worker processes, 0 (none: this process) or more")
    if args.as_part and (args.together or args.so_far or args.workers):
        parser.error(
            "--as-part replays the trees as one what-if part in this process: it does not go "
            "with --together, --so-far or --workers"
        )
    if args.workers and (args.together or args.so_far):
        parser.error(
            "--workers replays the trees apart: it does not go with --together or --so-far "
            "(both replay every tree at once in this process)"
        )
    if args.workers and (args.profile or args.tracemalloc):
        parser.error(
            "--workers: --profile and --tracemalloc watch this process only, and would slow "
            "the workers for nothing; run them without --workers"
        )
    if args.so_far:
        args.together = True  # a what-if's figures so far are read off one simulator
    if args.tracemalloc:
        tracemalloc.start()
    baseline = rss_mib()
    print(f"engine: {queues.engine.ENGINE.why}")
    print(
        f"generating {args.workloads:,} workloads: {args.teams} teams in {args.divisions} "
        f"cohorts, {args.days:g} days, seed {args.seed}",
        flush=True,
    )
    started = time.perf_counter()

    def tick(done: int) -> None:
        print(
            f"  generated {done:>9,}  {time.perf_counter() - started:6.1f} s  "
            f"RSS {rss_mib():,.0f} MiB",
            flush=True,
        )

    # A million new objects each trigger young collections that find nothing to free.
    gc.disable()
    trace = generate(args, tick)
    policy = organisation(args, trace)
    gc.enable()
    gc.collect()  # so the replay does not pay for the generator's objects' first walk
    generated = time.perf_counter()
    after_generation = rss_mib()
    n = len(trace.workloads)
    nominal = sum(
        quota.nominal
        for queue in policy.cluster_queues.values()
        for group in queue.resource_groups
        for flavor in group.flavors
        for resource_name, quota in flavor.resources.items()
        if resource_name == GPU
    )
    offered = sum(trace.offered.values()) / (args.days * DAY)
    print(
        f"trace: {n:,} workloads, {len(policy.cluster_queues)} ClusterQueues, "
        f"{len(policy.cohorts)} cohorts, {nominal:,} nominal GPUs, "
        f"offered {offered:,.0f} GPUs on average; {trace_shape(trace.workloads)}",
        flush=True,
    )
    print(
        f"generation {generated - started:.1f} s, RSS {after_generation:,.0f} MiB "
        f"({(after_generation - baseline) * 2**20 / n:,.0f} bytes a workload)",
        flush=True,
    )

    replay_started = time.perf_counter()
    cap_mib = args.max_rss_gib * 1024
    simulator: Simulator | None = None
    frame: Frame | None = None
    trees: dict[str, GroupReplay] = {}
    if args.together:
        simulator = Simulator(policy, trace.workloads)
        simulator.progress = Progress(simulator, replay_started, cap_mib)
        simulator.settler.timed = args.cycle_times
        trace.workloads = []  # the simulator holds them now
    else:
        frame = frame_of(w for w, _ in trace.workloads) if args.as_part else None
        trees = group_replays(policy, trace.workloads)
        trace.workloads = []  # the trees hold them now
        if frame is not None:
            print(f"  {len(trees)} independent cohort trees, as one what-if part", flush=True)
        elif not args.workers:
            kind = "tree" if len(trees) == 1 else "trees"
            print(
                f"  {len(trees)} independent cohort {kind}, replayed one after another",
                flush=True,
            )
    set_up = time.perf_counter()
    profiler = cProfile.Profile() if args.profile else None
    if profiler is not None:
        profiler.enable()
    settler: Any = None
    scheduler: Any = None

    def watch(tree: Simulator, name: str) -> None:
        tree.progress = Progress(
            tree, replay_started, cap_mib, label=f"tree {name}", by_share=False
        )

    if args.workers:
        result, settler, scheduler = replay_trees_in_processes(
            trees,
            args.workers,
            timed=args.cycle_times,
            started=replay_started,
            check_memory=lambda: within_cap(cap_mib),
            watch=watch,
        )
    elif frame is not None:
        result = replay_as_part(trees, frame, started=replay_started)
    elif simulator is None:
        result, settler, scheduler = replay_trees(
            trees,
            timed=args.cycle_times,
            started=replay_started,
            check_memory=lambda: within_cap(cap_mib),
            watch=watch,
        )
    elif args.so_far:
        result = replay_together(
            {"replay": simulator},
            so_far=SoFar(simulator, replay_started),
            every=args.so_far,
        )["replay"]
    else:
        result = simulator.run()
    if simulator is not None:
        settler, scheduler = simulator.settler, simulator.scheduler
    if profiler is not None:
        profiler.disable()
    finished = time.perf_counter()
    after_replay = rss_mib()
    peak = peak_mib()
    replay_s = finished - replay_started
    print(
        f"\nworkloads {n:,}; generation {generated - started:.1f} s; replay {replay_s:.1f} s "
        f"(set-up {set_up - replay_started:.1f} s, run {finished - set_up:.1f} s"
        f"{', under cProfile' if profiler else ''})"
    )
    print(
        f"admissions {result.admissions:,} ({result.admissions / replay_s:,.0f}/s), "
        f"cycles {result.cycles:,}, preemptions {sum(result.preemptions_by_reason.values()):,} "
        f"{dict(sorted(result.preemptions_by_reason.items()))}, livelocks {result.livelocks}, "
        f"simulated {(result.end - result.start) / DAY:.1f} days"
    )
    if settler is None:
        print("cycles and nominations: counted inside the part, not printed")
    else:
        print(cycle_figures(settler))
        print(nomination_figures(scheduler, result))
    print(
        f"memory: baseline {baseline:,.0f} MiB, after generation {after_generation:,.0f} MiB, "
        f"after replay {after_replay:,.0f} MiB, peak (ru_maxrss) {peak:,.0f} MiB; "
        f"replay state {(peak - after_generation) * 2**20 / n:,.0f} bytes a workload, "
        f"{(peak - baseline) * 2**20 / n:,.0f} in all"
    )
    print(f"\nwaits (published: {PUBLISHED_WAITS})")
    print(
        f"{'queue class':<16} {'workloads':>9} {'admitted':>9} {'p50 wait':>11} "
        f"{'p90 wait':>11} {'mean wait':>11} {'preempted':>9}"
    )
    for name, count, admitted, p50, p90, mean, preempted in class_figures(result):
        print(
            f"{name:<16} {count:>9,} {admitted:>9,} {_wait(p50):>11} {_wait(p90):>11} "
            f"{_wait(mean):>11} {preempted:>9,}"
        )
    if args.tracemalloc:
        snapshot = tracemalloc.take_snapshot()
        _, traced_peak = tracemalloc.get_traced_memory()
        print(f"\ntracemalloc peak {traced_peak / 2**20:,.0f} MiB; held at the end, by line:")
        for stat in snapshot.statistics("lineno")[:15]:
            print(f"  {stat.size / 2**20:8.1f} MiB {stat.count:>10,} blocks  {stat.traceback}")
    if profiler is not None:
        profiler.dump_stats(args.profile)
        stats = pstats.Stats(profiler, stream=sys.stdout).strip_dirs()
        print("\ntop 25 by tottime")
        stats.sort_stats("tottime").print_stats(25)
        print("top 25 by cumtime")
        stats.sort_stats("cumulative").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
