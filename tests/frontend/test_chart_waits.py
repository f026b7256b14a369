"""The wait and preemption charts: the worst p50/p95 waits per queue (in
minutes, or hours once the longest wait passes three hours), preemptions by
reason beside the GPU-hours they cost, the wait distribution with buckets
labelled for people, and the daily wait trend over admission bars. Pure: no
database; the rows and ``valid`` come from ``chart_support``."""

from __future__ import annotations

import math

import pytest

from frontend import charts
from frontend.charts import colour_for
from tests.frontend.chart_support import BUCKETS, PREEMPTIONS, TREND, WAITS, title, valid


def test_worst_waits_reads_in_minutes_below_three_hours_and_in_hours_above() -> None:
    chart = valid(charts.worst_waits(WAITS))
    p95, p50 = chart.figure["data"]
    assert (p95["name"], p95["type"], p50["name"], p50["mode"]) == ("p95", "bar", "p50", "markers")
    assert p95["y"] == ["team-llm", "team-eval", "team-new"]  # longest p95 first, unknown last
    assert p95["x"] == [120.0, 10.0, None]  # minutes: the longest wait is 2 h
    assert p50["x"] == [30.0, 0.75, None]
    assert p95["customdata"] == [["2 h"], ["10 min"], ["—"]]
    axis = chart.figure["layout"]["xaxis"]
    assert title(axis) == "time to admission (minutes)" and axis["ticksuffix"] == " min"
    assert chart.table.rows == [
        ["team-llm", "30 min", "2 h"],
        ["team-eval", "45 s", "10 min"],
        ["team-new", "—", "—"],
    ]
    long = valid(
        charts.worst_waits([{"cluster_queue": "q", "p50_seconds": 3600, "p95_seconds": 5 * 3600}])
    )
    assert long.figure["data"][0]["x"] == [5.0]
    assert title(long.figure["layout"]["xaxis"]) == "time to admission (hours)"


def test_preemptions_by_reason_shows_counts_and_gpu_hours_side_by_side() -> None:
    chart = valid(charts.preemptions_by_reason(PREEMPTIONS))
    count, lost = chart.figure["data"]
    assert count["y"] == ["InClusterQueue", "InCohortFairSharing", "InCohortReclamation"]
    assert count["x"] == [7, 3, 3] and lost["x"] == [4.0, 20.0, 12.5]
    assert (count["xaxis"], lost["xaxis"]) == ("x", "x2")
    layout = chart.figure["layout"]
    assert title(layout["xaxis"]) == "preemptions" and title(layout["xaxis2"]) == "GPU-hours lost"
    assert "GPU-hours lost" in lost["hovertemplate"]
    assert count["marker"]["color"] == [colour_for(r) for r in count["y"]]
    assert chart.table.rows[1] == ["InCohortFairSharing", "3", "20"]


def test_wait_distribution_labels_buckets_for_people() -> None:
    chart = valid(charts.wait_distribution(BUCKETS))
    (bars,) = chart.figure["data"]
    assert bars["x"] == ["≤ 1 min", "≤ 5 min", "≤ 1 h", "≤ 1 d", "> 1 d"]
    assert bars["y"] == [10, 4, 2, 1, 3]
    assert "workloads" in bars["hovertemplate"]
    assert chart.figure["layout"]["xaxis"]["type"] == "category"
    assert title(chart.figure["layout"]["yaxis"]) == "workloads"
    assert chart.table.rows[0] == ["≤ 1 min", "10", "50%"]
    assert chart.table.rows[-1] == ["> 1 d", "3", "15%"]
    fine = charts.wait_distribution(
        [{"le": 10, "count": 1}, {"le": 90, "count": 2}, {"le": 5400, "count": 0}]
    )
    assert fine.figure["data"][0]["x"] == ["≤ 10 s", "≤ 1.5 min", "≤ 1.5 h"]
    only_inf = charts.wait_distribution([{"le": math.inf, "count": 4}])
    assert only_inf.figure["data"][0]["x"] == ["any wait"]


def test_wait_trend_draws_daily_percentiles_over_admission_bars() -> None:
    chart = valid(charts.wait_trend(TREND))
    bars, p50, p95 = chart.figure["data"]
    assert (bars["name"], bars["type"], "yaxis" in bars) == ("admissions", "bar", False)
    assert p50["yaxis"] == p95["yaxis"] == "y2"  # drawn above the bars
    assert bars["x"] == ["2026-11-28", "2026-11-29", "2026-11-30"] and bars["y"] == [38, 39, 40]
    assert (p50["name"], p95["name"]) == ("p50 wait", "p95 wait")
    # The longest p95 is 5 h: hours.
    assert p95["y"] == [pytest.approx(4.6667), pytest.approx(4.8333), 5.0]
    assert p95["customdata"][-1] == ["5 h"]
    layout = chart.figure["layout"]
    assert title(layout["yaxis2"]) == "time to admission (hours)"
    assert layout["yaxis2"]["overlaying"] == "y" and layout["yaxis2"]["side"] == "left"
    assert title(layout["yaxis"]) == "admissions" and layout["yaxis"]["side"] == "right"
    assert layout["xaxis"]["dtick"] == 86_400_000  # a tick per day
    assert chart.table.rows[-1] == ["2026-11-30", "30 min", "5 h", "40"]
