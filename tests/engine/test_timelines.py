"""Timeline tests: each YAML file in ``timelines/`` pins one rule of how Kueue
behaves over time (requeue batches, parked and blocking heads, eviction), as
the simulator plays it and the start estimate foresees it.

A file is a scenario (``docs/scenarios.md``, with its ``simulation:`` timing)
plus:

    rule: what the file pins, in one sentence
    expect:
      admittedAt: {wl: seconds}        # first admission, on the scenario's clock
      neverAdmitted: [wl, ...]
      timedOutAt: {wl: seconds}        # deactivated past its maximum execution time
      finishedAt: {wl: seconds}
      podsReadyTimeouts: {wl: n}       # evictions for pods not ready in time
      requeueLimitExceededAt: {wl: s}  # deactivated past waitForPodsReady's limit
      estimate: {workload: wl, at: seconds, earliest: s, latest: s}
                                       # the estimate from the scenario's state at ``at``
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from queues.engine.estimate import Pace, estimate_start
from queues.engine.experiment import simulate
from queues.engine.runner import scheduler_for
from queues.engine.scenario import parse

TIMELINES = sorted((Path(__file__).parent / "timelines").glob("*.yaml"))


def load(path: Path) -> tuple[Any, dict[str, Any]]:
    document = yaml.safe_load(path.read_text())
    expect = document.pop("expect")
    document.pop("rule")
    return parse(document, str(path)), expect


@pytest.mark.parametrize("path", TIMELINES, ids=[p.stem for p in TIMELINES])
def test_timeline(path: Path) -> None:
    scenario, expect = load(path)
    result, _ = simulate(scenario)
    first = {key.removeprefix("default/"): r.first_admitted for key, r in result.records.items()}
    for name, at in (expect.get("admittedAt") or {}).items():
        assert first[name] == pytest.approx(at), (name, first)
    for name in expect.get("neverAdmitted") or []:
        assert first[name] is None, (name, first)
    for name, at in (expect.get("timedOutAt") or {}).items():
        record = result.records[f"default/{name}"]
        assert record.timed_out == pytest.approx(at) and record.finished is None, (name, record)
    for name, at in (expect.get("finishedAt") or {}).items():
        assert result.records[f"default/{name}"].finished == pytest.approx(at), name
    for name, count in (expect.get("podsReadyTimeouts") or {}).items():
        assert result.records[f"default/{name}"].pods_ready_timeouts == count, name
    for name, at in (expect.get("requeueLimitExceededAt") or {}).items():
        record = result.records[f"default/{name}"]
        assert record.requeue_limit_exceeded == pytest.approx(at), (name, record)
        assert record.finished is None, (name, record)
    wanted = expect.get("estimate")
    if wanted:
        scheduler = scheduler_for(scenario)
        scheduler.now = float(wanted["at"])
        timing = scenario.timing
        got = estimate_start(
            scheduler,
            f"default/{wanted['workload']}",
            pace=Pace(timing.requeue_delay, timing.eviction_delay),
        )
        assert (got.earliest, got.latest) == (wanted["earliest"], wanted["latest"]), got


def test_every_timeline_says_what_it_pins() -> None:
    assert len(TIMELINES) >= 7
    for path in TIMELINES:
        assert yaml.safe_load(path.read_text()).get("rule"), path.name


def test_the_simulate_command_takes_the_scenarios_timing_unless_told(tmp_path: Path) -> None:
    import io
    import json

    from django.core.management import call_command

    path = TIMELINES[0].parent / "evicted_quota_released_at_once.yaml"
    document = yaml.safe_load(path.read_text())
    for key in ("rule", "expect"):
        document.pop(key)
    scenario_file = tmp_path / "s.yaml"
    scenario_file.write_text(yaml.safe_dump(document))
    figures = tmp_path / "figures.json"
    call_command("simulate", str(scenario_file), "--json", str(figures), stdout=io.StringIO())
    told = tmp_path / "told.json"
    call_command(
        "simulate", str(scenario_file), "--eviction-delay", "30", "--json", str(told),
        stdout=io.StringIO(),
    )  # fmt: skip

    def urgent_wait(file: Path) -> float:
        summary = json.loads(file.read_text())["s"]  # keyed by the scenario's name
        return float(summary["cluster_queues"]["q"]["time_to_admission"]["max"])

    assert urgent_wait(figures) == 0.0  # released at once: admitted as it preempts
    assert urgent_wait(told) == 30.0
