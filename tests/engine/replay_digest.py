"""What the engine answers, printed as JSON, for the compiled and the pure
engine to be compared in separate processes (test_compiled_engine.py):
replays of the shipped scenarios and of a generated month (every record's
admission, finish, preemptions and work lost; the cycle count; every
queue's resource-seconds used, borrowed and lent), and along
the demo day, every 7th arrival's start estimate and explanation (which run
on deep copies of the scheduler).

    python -m tests.engine.replay_digest
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from month_trace import generate, organisation  # noqa: E402

import queues.engine  # noqa: E402
from queues.engine.estimate import Pace, estimate_start  # noqa: E402
from queues.engine.events import ARRIVE  # noqa: E402
from queues.engine.experiment import workload_stream  # noqa: E402
from queues.engine.explain import explain  # noqa: E402
from queues.engine.scenario import load  # noqa: E402
from queues.engine.scheduler import Scheduler  # noqa: E402
from queues.engine.simulator import SimulationResult, Simulator  # noqa: E402

SCENARIOS = ROOT / "scenarios"


def figures(result: SimulationResult) -> dict[str, Any]:
    return {
        "cycles": result.cycles,
        "admissions": result.admissions,
        "preemptions": result.preemptions_by_reason,
        "records": {
            key: [r.first_admitted, r.finished, r.preemptions, round(r.lost_seconds, 6)]
            for key, r in sorted(result.records.items())
        },
        # Every figure the usage meter integrated, in the order it keeps them.
        "totals": {
            name: [
                [[*fr, seconds] for fr, seconds in kept.items()]
                for kept in (totals.used, totals.borrowed, totals.lent)
            ]
            for name, totals in result.totals.items()
        },
    }


def replaying(name: str) -> tuple[Simulator, Pace]:
    """A simulator of the shipped scenario ``name``, with its timing."""
    loaded = load(SCENARIOS / f"{name}.yaml")
    timing = loaded.timing
    simulator = Simulator(
        loaded.policy,
        workload_stream(loaded),
        requeue_delay=timing.requeue_delay,
        eviction_delay=timing.eviction_delay,
    )
    return simulator, Pace(timing.requeue_delay, timing.eviction_delay)


def scenario(name: str) -> dict[str, Any]:
    return figures(replaying(name)[0].run())


def month(workloads: int) -> dict[str, Any]:
    args = argparse.Namespace(
        workloads=workloads, teams=40, days=3.0, divisions=4, seed=7, load=1.3
    )
    trace = generate(args, lambda done: None)
    return figures(Simulator(organisation(args, trace), trace.workloads).run())


def asked_along(name: str, every: int) -> dict[str, Any]:
    simulator, pace = replaying(name)
    answers: dict[str, Any] = {}
    arrived = 0

    def ask(now: float, kind: str, payload: Any) -> None:
        nonlocal arrived
        if kind != ARRIVE or payload.admission is not None:
            return
        arrived += 1
        if arrived % every:
            return
        scheduler: Scheduler = simulator.scheduler
        scheduler.now = now
        estimate = estimate_start(scheduler, payload.key, now, pace=pace)
        explained = dataclasses.asdict(explain(scheduler, payload.key))
        answers[payload.key] = [estimate.earliest, estimate.latest, explained]

    simulator.after_event = ask
    simulator.run()
    return answers


def main() -> None:
    print(
        json.dumps(
            {
                "engine": queues.engine.ENGINE.compiled,
                "scheduler_module": Path(sys.modules[Scheduler.__module__].__file__ or "").name,
                "demo-day": scenario("demo-day"),
                "kueue-perf-baseline-poisson": scenario("kueue-perf-baseline-poisson"),
                "month": month(4000),
                "asked": asked_along("demo-day", 7),
            },
            sort_keys=True,
            default=str,
        )
    )


if __name__ == "__main__":
    main()
