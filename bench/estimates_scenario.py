"""How good are the engine's start estimates on a scenario? The half of
``bench/estimates.py`` that needs no database: the scenario's stream is
simulated; as each workload arrives (every ``--every``-th), the estimate
``berth why`` would give is taken from the state at that instant (the same
``estimate_start``, with the scenario's timing); at the end each range is
compared with when the workload was really first admitted.

    .venv/bin/python bench/estimates_scenario.py                     # demo-day
    .venv/bin/python bench/estimates_scenario.py scenarios/x.yaml --every 1

Prints the share admitted inside the range (one requeue delay of slack either
side), the median and p90 error of the range's midpoint, how often "fits now"
(both ends at the arrival) was right, and how often no start was foreseen
(``HORIZON``) and how often that was right: the workload was never admitted
in the scenario's run (which plays to its end), or admitted only after what
the range left open. A range given to a workload never admitted is outside.
Later arrivals are not known to the estimate; as Berth does on a cluster
(``cluster.state.expected_arrivals``), the latest end assumes the past
hour's arrivals come again (``--no-arrivals``: assume none). Prints figures;
asserts nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from queues.engine.estimate import HORIZON, Pace, StartEstimate, estimate_start  # noqa: E402
from queues.engine.events import ARRIVE  # noqa: E402
from queues.engine.experiment import workload_stream  # noqa: E402
from queues.engine.model import Workload  # noqa: E402
from queues.engine.scenario import load  # noqa: E402
from queues.engine.simulator import Simulator  # noqa: E402


class Probing:
    """Asks for an estimate as chosen workloads arrive in ``simulator``
    (its ``after_event`` hook)."""

    def __init__(self, simulator: Simulator, *, every: int, pace: Pace, replay: float) -> None:
        self.simulator = simulator
        self.every = max(1, every)
        self.pace = pace
        self.replay = replay
        self.arrived = 0
        self.seen: list[Workload] = []
        self.asked: dict[str, tuple[float, StartEstimate]] = {}
        simulator.after_event = self.after_event

    def after_event(self, now: float, kind: str, payload: Any) -> None:
        if kind != ARRIVE or payload.admission is not None:
            return
        self.seen.append(payload)
        self.arrived += 1
        if self.arrived % self.every:
            return
        scheduler = self.simulator.scheduler
        scheduler.now = now
        self.asked[payload.key] = (
            now,
            estimate_start(scheduler, payload.key, now, pace=self.pace, arrivals=self._again(now)),
        )

    def _again(self, now: float) -> list[Workload]:
        """The arrivals of the last ``replay`` seconds (or of the run so far,
        if shorter), once more, that much later."""
        span = min(self.replay, now - self.simulator.start)
        if span <= 0:
            return []
        again = []
        for seen in self.seen:
            if seen.creation_time >= now - span:
                copied = dataclasses.replace(
                    seen, name=f"{seen.name}.again", creation_time=seen.creation_time + span
                )
                copied.queued_at = None
                again.append(copied)
        return again


INSIDE, OUTSIDE, NONE_RIGHT, NONE_WRONG = "inside", "outside", "none right", "none wrong"


def judge(asked_at: float, estimate: StartEstimate, admitted: float | None, slack: float) -> str:
    """How an estimate asked at ``asked_at`` fared against the first admission
    (None: never admitted in a run played to its end), ``slack`` either side.
    With no latest start, the estimate says it may not start within
    ``HORIZON``: right if it never did, or did no sooner than it allowed."""
    if estimate.latest is None:
        sooner = estimate.earliest if estimate.earliest is not None else asked_at + HORIZON
        return NONE_RIGHT if admitted is None or admitted >= sooner - slack else NONE_WRONG
    if admitted is None:
        return OUTSIDE  # it said a start that never came
    low = estimate.earliest if estimate.earliest is not None else asked_at
    return INSIDE if low - slack <= admitted <= estimate.latest + slack else OUTSIDE


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", nargs="?", default=str(ROOT / "scenarios" / "demo-day.yaml"))
    parser.add_argument("--every", type=int, default=5, help="estimate every n-th arrival")
    parser.add_argument("--no-arrivals", action="store_true", help="assume nothing more arrives")
    parser.add_argument(
        "--dump", metavar="FILE", help="write every estimate and its outcome to FILE (JSON lines)"
    )
    args = parser.parse_args()

    scenario = load(args.scenario)
    timing = scenario.timing
    pace = Pace(timing.requeue_delay, timing.eviction_delay)
    started = time.perf_counter()
    simulator = Simulator(
        scenario.policy,
        workload_stream(scenario),
        requeue_delay=timing.requeue_delay,
        eviction_delay=timing.eviction_delay,
    )
    probing = Probing(
        simulator, every=args.every, pace=pace, replay=0.0 if args.no_arrivals else 3600.0
    )
    result = simulator.run()
    elapsed = time.perf_counter() - started

    slack = max(1.0, timing.requeue_delay)
    fits_said = fits_right = never_admitted = 0
    verdicts = dict.fromkeys((INSIDE, OUTSIDE, NONE_RIGHT, NONE_WRONG), 0)
    errors: list[float] = []
    for key, (asked_at, estimate) in probing.asked.items():
        admitted = result.records[key].first_admitted
        never_admitted += admitted is None
        verdicts[judge(asked_at, estimate, admitted, slack)] += 1
        if estimate.earliest is None or estimate.latest is None:
            continue
        if estimate.latest <= asked_at + slack:
            fits_said += 1
            fits_right += admitted is not None and admitted <= asked_at + slack
        if admitted is not None:
            errors.append(abs((estimate.earliest + estimate.latest) / 2 - admitted))
    if args.dump:
        with Path(args.dump).open("w") as out:
            for key, (asked_at, estimate) in probing.asked.items():
                row = [key, asked_at, estimate.earliest, estimate.latest]
                out.write(json.dumps([*row, result.records[key].first_admitted]) + "\n")
    asked = len(probing.asked)
    inside, judged = verdicts[INSIDE], verdicts[INSIDE] + verdicts[OUTSIDE]
    unknown = verdicts[NONE_RIGHT] + verdicts[NONE_WRONG]
    median = statistics.median(errors) if errors else None
    p90 = percentile(errors, 0.9)
    print(f"scenario        {args.scenario}")
    which = "every arrival" if args.every == 1 else f"every {args.every}th arrival"
    print(f"estimates       {asked} ({which} of {probing.arrived})")
    print(f"wall            {elapsed:.1f} s")
    print(f"inside range    {inside}/{judged} = {inside / max(judged, 1):.0%}   (goal >= 80%)")
    if median is not None and p90 is not None:
        print(f"midpoint error  median {median:.0f} s, p90 {p90:.0f} s")
    print(
        f"fits now right  {fits_right}/{fits_said} = {fits_right / max(fits_said, 1):.0%}"
        "   (goal >= 95%)"
    )
    print(f"unknown         {unknown}/{asked} = {unknown / max(asked, 1):.0%}   (goal <= 5%)")
    print(
        f"  of which right {verdicts[NONE_RIGHT]}/{unknown}"
        "   (never admitted, or no sooner than the range left open)"
    )
    print(f"never admitted  {never_admitted} of those asked about (in the scenario's run)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
