"""Scenario tests: each YAML file in ``scenarios/`` pins one Kueue rule.

A file is a scenario (the format of ``manage.py admission_cycle``) plus:

    rule: what the file pins, in one sentence
    cycle: once | until-stable        # default once
    expect:
      admitted: {wl: {podSet: {resource: flavor}}}   # exactly these (new) admissions
      quotaReserved: {...}                           # reserved, waiting for checks
      admittedCounts: {wl: {podSet: pods}}          # partial admission's counts
      placedOn: {wl: {node: pods}}                   # topology-aware placement
      preempted: [wl, ...]                           # exactly these victims
      pending: {wl: Reason}                          # or {wl: {reason: R, message: "substring"}}

Keys left out of ``expect`` are not checked. No database is needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from queues.engine.runner import report, run_cycles, scheduler_for
from queues.engine.scenario import parse

SCENARIOS = sorted((Path(__file__).parent / "scenarios").glob("*.yaml"))


def run(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    document = yaml.safe_load(path.read_text())
    expect = document.pop("expect")
    document.pop("rule", None)
    cycle = document.pop("cycle", "once")
    assert cycle in ("once", "until-stable"), f"{path.name}: cycle must be once or until-stable"
    scenario = parse(document, str(path))
    scheduler = scheduler_for(scenario)
    result = run_cycles(scheduler, until_stable=cycle == "until-stable")
    actual = report(scheduler, result)
    actual["admittedCounts"] = {
        key.removeprefix("default/"): workload.admitted_counts
        for key, workload in scheduler.workloads.items()
        if workload.admitted_counts
    }
    placer = scheduler.placer
    actual["placedOn"] = {
        key.removeprefix("default/"): {
            node: pods for nodes in pod_sets.values() for node, pods in nodes.items()
        }
        for key, pod_sets in (placer.pods_on if placer else {}).items()
    }
    return actual, expect


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path) -> None:
    actual, expect = run(path)
    for key in ("admitted", "quotaReserved"):
        if key in expect:
            assert actual.get(key, {}) == expect[key], f"{key}: {actual.get(key)}"
    for name, nodes in (expect.get("placedOn") or {}).items():
        assert actual["placedOn"].get(name) == nodes, actual["placedOn"]
    for name, counts in (expect.get("admittedCounts") or {}).items():
        assert actual["admittedCounts"].get(name) == counts, actual["admittedCounts"]
    if "preempted" in expect:
        assert actual["preempted"] == sorted(expect["preempted"]), actual["preempted"]
    for name, wanted in (expect.get("pending") or {}).items():
        assert name in actual["pending"], f"{name} is not pending: {actual}"
        got = actual["pending"][name]
        if isinstance(wanted, str):
            assert got["reason"] == wanted, f"{name}: {got}"
        else:
            assert got["reason"] == wanted["reason"], f"{name}: {got}"
            assert wanted.get("message", "") in got["message"], f"{name}: {got['message']}"


def test_there_are_enough_scenarios() -> None:
    assert len(SCENARIOS) >= 40
