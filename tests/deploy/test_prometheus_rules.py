"""The Prometheus alerting rules Berth ships (deploy/base/prometheus-rules.yaml),
evaluated with ``for:`` over recorded series of the fair-share metrics by the
evaluator of test_prometheus_rules_promql.py: a starved team raises
BerthTeamStarved after ten minutes, and it resolves once the team is served
or nothing of it waits; kustomize ships the file as it is."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.deploy.manifests import DEPLOY, OVERLAYS, build
from tests.deploy.test_prometheus_rules_promql import (
    Rule,
    Scrapes,
    evaluate_rules,
    firing,
    load_rules,
    samples,
)

RULES_FILE = DEPLOY / "base" / "prometheus-rules.yaml"
MINUTE = 60.0


@pytest.fixture(scope="module")
def rules() -> list[Rule]:
    return load_rules(RULES_FILE.read_text())


def scrape(
    ratio_1h: dict[str, float],
    waiting: dict[str, float],
    *,
    below: float = 0.5,
    ratio_24h: dict[str, float] | None = None,
    evaluated: float = 0.0,
) -> dict:
    """One /metrics page of the fair-share families (the ratio is absent for a
    team not in ``ratio_1h``, as Berth leaves it out)."""
    values: dict = {}
    for team in sorted(set(ratio_1h) | set(waiting)):
        values[("berth_team_waiting_gpus", (("team", team),))] = waiting.get(team, 0.0)
        for window in ("1h", "24h", "7d"):
            values[
                ("berth_team_fair_share_starved_below", (("team", team), ("window", window)))
            ] = below
        if team in ratio_1h:
            values[("berth_team_fair_share_ratio", (("team", team), ("window", "1h")))] = ratio_1h[
                team
            ]
        if ratio_24h and team in ratio_24h:
            values[("berth_team_fair_share_ratio", (("team", team), ("window", "24h")))] = (
                ratio_24h[team]
            )
    values[("berth_fair_share_evaluated_timestamp_seconds", ())] = evaluated
    return samples(values)


def test_the_rules_file_holds_alerting_rules_in_the_subset_with_readable_annotations(
    rules: list[Rule],
) -> None:
    assert [r.alert for r in rules] == [
        "BerthTeamStarved",
        "BerthTeamStarvedForADay",
        "BerthFairShareStale",
    ]
    for rule in rules:
        assert rule.labels["severity"] in ("warning", "critical")
        assert {"summary", "description"} <= set(rule.annotations)
        for text in rule.annotations.values():
            # Templates name only what the alert carries.
            for variable in re.findall(r"\{\{\s*\$(\w+)", text):
                assert variable in ("labels", "value"), (rule.alert, variable)
            assert set(re.findall(r"\$labels\.(\w+)", text)) <= {"team"}


def test_a_starved_team_raises_the_alert_after_ten_minutes_and_it_clears_when_served(
    rules: list[Rule],
) -> None:
    recorded = Scrapes()
    # Minute 0-19: research at 10 % of its share with 8 GPUs waiting; vision
    # also low but nothing of it waits; ml fine. From minute 20 research is served
    # (ratio still low for a while, nothing waits); minute 30 it waits again, fine.
    for minute in range(0, 40):
        at = minute * MINUTE
        if minute < 20:
            page = scrape(
                {"research": 0.1, "vision": 0.1, "ml": 0.9}, {"research": 8, "ml": 4}, evaluated=at
            )
        elif minute < 30:
            page = scrape({"research": 0.3, "ml": 0.9}, {"research": 0, "ml": 4}, evaluated=at)
        else:
            page = scrape({"research": 0.7, "ml": 0.9}, {"research": 8, "ml": 4}, evaluated=at)
        recorded.add(at, page)
    timeline = evaluate_rules(rules, recorded, [m * MINUTE for m in range(40)])
    starved = {m: firing(timeline[m * MINUTE], "BerthTeamStarved") for m in range(40)}
    assert starved[0] == {"research": "pending"}
    assert starved[9] == {"research": "pending"}
    assert starved[10] == starved[19] == {"research": "firing"}
    assert starved[20] == {} and starved[39] == {}
    alert = next(a for a in timeline[10 * MINUTE] if a.alert == "BerthTeamStarved")
    assert alert.value == 0.1
    assert dict(alert.labels) == {
        "alertname": "BerthTeamStarved",
        "team": "research",
        "window": "1h",
        "severity": "warning",
    }
    assert all(not firing(timeline[m * MINUTE], "BerthFairShareStale") for m in range(40))


def test_a_teams_own_threshold_decides_and_a_day_long_starvation_escalates(
    rules: list[Rule],
) -> None:
    recorded = Scrapes()
    for minute in range(0, 70):
        recorded.add(
            minute * MINUTE,
            scrape(
                {"research": 0.3},
                {"research": 8},
                below=0.25,  # its own threshold: 30 % is not starved
                ratio_24h={"research": 0.2},
                evaluated=minute * MINUTE,
            ),
        )
    timeline = evaluate_rules(rules, recorded, [m * MINUTE for m in range(70)])
    assert firing(timeline[30 * MINUTE], "BerthTeamStarved") == {}
    assert firing(timeline[59 * MINUTE], "BerthTeamStarvedForADay") == {"research": "pending"}
    assert firing(timeline[60 * MINUTE], "BerthTeamStarvedForADay") == {"research": "firing"}


def test_figures_nobody_refreshes_raise_the_stale_alert(rules: list[Rule]) -> None:
    recorded = Scrapes()
    for minute in range(0, 30):
        recorded.add(minute * MINUTE, scrape({}, {}, evaluated=0.0))  # beat stopped at 0
    timeline = evaluate_rules(rules, recorded, [m * MINUTE for m in range(30)])
    assert not any(a.alert == "BerthFairShareStale" for a in timeline[10 * MINUTE])
    assert [a.state for a in timeline[11 * MINUTE]] == ["pending"]
    assert [a.state for a in timeline[16 * MINUTE]] == ["firing"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_kustomize_ships_the_rules_file_unchanged_under_a_fixed_name(overlay: str) -> None:
    built = build(overlay)
    config = built.get("ConfigMap", "berth-prometheus-rules")
    assert config["metadata"]["namespace"] == "berth"
    shipped = config["data"]["prometheus-rules.yaml"]
    assert yaml.safe_load(shipped) == yaml.safe_load(RULES_FILE.read_text())
