"""The capacity and pending charts: GPUs allocated against capacity over time
(with utilisation drawn only where it was reported, and labelled with its
source), capacity now as grouped horizontal bars per flavor, and pending work
per ClusterQueue with the most requested GPUs first. Pure: no database; the
rows and ``valid`` come from ``chart_support``."""

from __future__ import annotations

from frontend import charts
from tests.frontend.chart_support import (
    CAPACITY_NOW,
    CAPACITY_SERIES,
    PENDING,
    title,
    traces,
    valid,
)


def test_capacity_over_time_draws_allocated_capacity_and_simulated_utilisation() -> None:
    chart = valid(charts.capacity_over_time(CAPACITY_SERIES, utilisation_source="simulated"))
    names = [t["name"] for t in chart.figure["data"]]
    # Sorted by flavor; a100 never reported utilisation, so it has no utilised line.
    assert names == [
        "a100 allocated",
        "a100 capacity",
        "h100-spot allocated",
        "h100-spot capacity",
        "h100-spot utilised (simulated)",
    ]
    by_name = traces(chart)
    assert [by_name[n]["line"]["dash"] for n in names[2:]] == ["solid", "dash", "dot"]
    spot = by_name["h100-spot allocated"]
    assert spot["x"][:2] == ["2026-11-30T12:00:00Z", "2026-11-30T12:05:00Z"]
    assert spot["y"] == [40, 41, 42, 43]
    assert by_name["h100-spot utilised (simulated)"]["y"] == [31.5, 32.5, 33.5, 34.5]
    assert all("GPUs" in t["hovertemplate"] for t in chart.figure["data"])
    layout = chart.figure["layout"]
    assert title(layout["yaxis"]) == "GPUs"
    assert layout["xaxis"]["type"] == "date" and title(layout["xaxis"]) == "time (UTC)"
    assert chart.table.headers[-1] == "utilised (simulated) (GPUs)"
    assert chart.table.rows[:2] == [
        ["2026-11-30 12:00", "a100", "32", "8", "—"],
        ["2026-11-30 12:00", "h100-spot", "64", "40", "31.5"],
    ]
    assert "utilised (simulated)" not in charts.capacity_over_time(CAPACITY_SERIES).figure_json()


def test_capacity_now_groups_horizontal_bars_per_flavor() -> None:
    chart = valid(charts.capacity_now(CAPACITY_NOW))
    assert [t["name"] for t in chart.figure["data"]] == ["capacity", "allocated", "utilised"]
    layout = chart.figure["layout"]
    assert layout["barmode"] == "group" and layout["yaxis"]["autorange"] == "reversed"
    assert title(layout["xaxis"]) == "GPUs"
    allocated = traces(chart)["allocated"]
    assert allocated["orientation"] == "h"
    assert allocated["y"] == ["a100", "h100-ondemand", "h100-spot"]
    assert allocated["x"] == [8, 128, 48]
    assert allocated["text"] == ["25%", "100%", "75%"]
    assert traces(chart)["utilised"]["x"] == [None, 120.0, 40.25]
    assert chart.table.rows[0] == ["a100", "32", "8", "—", "25%"]
    assert chart.table.rows[2] == ["h100-spot", "64", "48", "40.2", "75%"]
    no_util = charts.capacity_now([{**r, "utilised": None} for r in CAPACITY_NOW])
    assert [t["name"] for t in no_util.figure["data"]] == ["capacity", "allocated"]


def test_pending_by_queue_puts_the_most_gpus_first_with_workload_counts() -> None:
    chart = valid(charts.pending_by_queue(PENDING))
    (bars,) = chart.figure["data"]
    # 48 GPUs first; team-eval and team-vision both want 8: more workloads first.
    assert bars["y"] == ["team-llm", "team-eval", "team-vision"]
    assert bars["x"] == [48, 8, 8]
    assert bars["text"] == ["3 workloads", "12 workloads", "1 workload"]
    assert bars["customdata"] == [[3], [12], [1]]
    assert "GPUs requested" in bars["hovertemplate"]
    assert "pending workloads" in bars["hovertemplate"]
    assert chart.table.headers == ["ClusterQueue", "pending workloads", "requested GPUs"]
    assert chart.table.rows[0] == ["team-llm", "3", "48"]
