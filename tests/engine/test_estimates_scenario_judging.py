"""``bench/estimates_scenario.py`` judges each estimate against the first
admission of a run played to its end: "no start within 30 days" for a
workload never admitted is right, a range for one never admitted is wrong
(both were left out of the figures before)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from queues.engine.estimate import HORIZON, StartEstimate

BENCH = Path(__file__).resolve().parents[2] / "bench" / "estimates_scenario.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("estimates_scenario", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _bench()
SLACK = 1.0


def test_a_range_is_right_when_the_admission_falls_inside_it_give_or_take_the_slack() -> None:
    estimate = StartEstimate(100.0, 200.0)
    assert bench.judge(0.0, estimate, 150.0, SLACK) == bench.INSIDE
    assert bench.judge(0.0, estimate, 99.0, SLACK) == bench.INSIDE
    assert bench.judge(0.0, estimate, 201.0, SLACK) == bench.INSIDE
    assert bench.judge(0.0, estimate, 98.0, SLACK) == bench.OUTSIDE
    assert bench.judge(0.0, estimate, 202.0, SLACK) == bench.OUTSIDE


def test_a_range_for_a_workload_never_admitted_is_outside() -> None:
    assert bench.judge(0.0, StartEstimate(100.0, 200.0), None, SLACK) == bench.OUTSIDE


def test_no_start_foreseen_is_right_for_a_workload_never_admitted() -> None:
    assert bench.judge(0.0, StartEstimate(None, None), None, SLACK) == bench.NONE_RIGHT


def test_no_start_foreseen_is_right_only_past_the_horizon() -> None:
    none = StartEstimate(None, None)
    asked = 500.0
    assert bench.judge(asked, none, asked + HORIZON + 10, SLACK) == bench.NONE_RIGHT
    assert bench.judge(asked, none, asked + HORIZON - 10, SLACK) == bench.NONE_WRONG


def test_a_range_open_at_its_end_is_right_from_its_earliest_on() -> None:
    open_ended = StartEstimate(300.0, None)
    assert bench.judge(0.0, open_ended, None, SLACK) == bench.NONE_RIGHT
    assert bench.judge(0.0, open_ended, 5000.0, SLACK) == bench.NONE_RIGHT
    assert bench.judge(0.0, open_ended, 200.0, SLACK) == bench.NONE_WRONG
