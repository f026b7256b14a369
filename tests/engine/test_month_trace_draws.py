"""``bench/month_trace.py`` works out each class's draws once (``_Draws``)
instead of asking ``rng.choices`` and ``Runtime.sample`` per workload: the
trace must be the one those give, draw for draw, or every figure and digest
made from it moves."""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from month_trace import LOADS, _Draws


def test_each_class_draws_what_choices_and_sample_draw() -> None:
    for load in LOADS:
        draws = _Draws(load)
        asked, worked_out = random.Random(7), random.Random(7)
        for _ in range(2_000):
            gpus = asked.choices(load.gpus[0], weights=load.gpus[1])[0]
            runtime = min(load.runtime.sample(asked), load.cap)
            assert draws.gpus(worked_out) == gpus, load.name
            drawn = draws.runtime(worked_out)
            assert drawn == runtime, load.name  # equal floats, not close ones
        assert draws.priority == load.priority
