"""The dashboard's chart builders (frontend.charts): rows in, plotly figure dicts
and table fallbacks out. Pure: no database. Every figure is checked by plotly's
own validator (``plotly.graph_objects.Figure`` raises on an invalid property)."""

from __future__ import annotations

import itertools
import json
import math
import random
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frontend import charts
from frontend.charts import Chart, Table, colour_for, format_duration, resource_unit
from frontend.charts.timeline import phases

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
GiB = 2**30


def at(minutes: float = 0, hours: float = 0) -> datetime:
    return T0 + timedelta(minutes=minutes, hours=hours)


def valid(chart: Chart) -> Chart:
    """What holds for every chart: plotly accepts it, its JSON round-trips and
    is safe in HTML, meta agrees with ``empty``, the size is dashboard-sized."""
    go.Figure(chart.figure)
    text = chart.figure_json()
    assert json.loads(text) == chart.figure
    assert "<" not in text and ">" not in text and "&" not in text
    compact = json.dumps(chart.figure, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    assert json.loads(text) == json.loads(compact) and len(text) >= len(compact)
    assert len(text) - len(compact) == 5 * sum(compact.count(c) for c in "<>&")  # only escapes
    layout = chart.figure["layout"]
    assert layout["meta"]["empty"] is chart.empty
    assert 280 <= layout["height"] <= 700
    assert all(v <= 60 for v in layout["margin"].values())
    assert isinstance(chart.table, Table)
    assert all(len(row) == len(chart.table.headers) for row in chart.table.rows)
    assert all(isinstance(cell, str) for row in chart.table.rows for cell in row)
    return chart


def traces(chart: Chart) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in chart.figure["data"]}


def title(axis: dict[str, Any]) -> str:
    return str(axis["title"]["text"])


# --- realistic rows -------------------------------------------------------------

CAPACITY_SERIES = [
    {"at": at(5 * i), "flavor": flavor, "capacity": cap, "allocated": alloc + i, "utilised": util}
    for i in range(4)
    for flavor, cap, alloc, util in (
        ("h100-spot", 64, 40, 31.5 + i),
        ("a100", 32, 8, None),
    )
]
CAPACITY_NOW = [
    {"flavor": "h100-spot", "capacity": 64, "allocated": 48, "utilised": 40.25},
    {"flavor": "a100", "capacity": 32, "allocated": 8, "utilised": None},
    {"flavor": "h100-ondemand", "capacity": 128, "allocated": 128, "utilised": 120.0},
]
PENDING = [
    {"cluster_queue": "team-vision", "pending_workloads": 1, "requested_gpus": 8},
    {"cluster_queue": "team-llm", "pending_workloads": 3, "requested_gpus": 48},
    {"cluster_queue": "team-eval", "pending_workloads": 12, "requested_gpus": 8},
]
WAITS = [
    {"cluster_queue": "team-eval", "p50_seconds": 45.0, "p95_seconds": 600.0},
    {"cluster_queue": "team-llm", "p50_seconds": 1800.0, "p95_seconds": 7200.0},
    {"cluster_queue": "team-new", "p50_seconds": None, "p95_seconds": None},
]
PREEMPTIONS = [
    {"reason": "InCohortReclamation", "count": 3, "gpu_hours_lost": 12.5},
    {"reason": "InClusterQueue", "count": 7, "gpu_hours_lost": 4.0},
    {"reason": "InCohortFairSharing", "count": 3, "gpu_hours_lost": 20.0},
]
QUOTA = [
    {"flavor": "h100-ondemand", "resource": "cpu", "nominal": 64000, "usage": 12500,
     "borrowed": 0, "lent": 0},
    {"flavor": "h100-ondemand", "resource": "memory", "nominal": 512 * GiB, "usage": 96 * GiB,
     "borrowed": 0, "lent": 0},
    {"flavor": "h100-ondemand", "resource": "nvidia.com/gpu", "nominal": 16, "usage": 20,
     "borrowed": 4, "lent": 0},
    {"flavor": "h100-spot", "resource": "nvidia.com/gpu", "nominal": 8, "usage": 0,
     "borrowed": 0, "lent": 8},
]  # fmt: skip
USAGE = [
    {"at": at(10 * i), "flavor": flavor, "usage": use, "borrowed": borrowed, "nominal": nominal}
    for i in range(3)
    for flavor, use, borrowed, nominal in (("h100-ondemand", 12 + i, i, 16), ("h100-spot", 4, 0, 8))
]
BUCKETS = [
    {"le": 300.0, "count": 4},
    {"le": 60.0, "count": 10},
    {"le": 3600.0, "count": 2},
    {"le": 86400.0, "count": 1},
    {"le": math.inf, "count": 3},
]
TREND = [
    {"day": date(2026, 11, d), "p50_seconds": 60.0 * d, "p95_seconds": 600.0 * d,
     "admissions": 10 + d}
    for d in (28, 29, 30)
]  # fmt: skip
EVENTS = [
    {"type": "submitted", "at": at(0), "reason": ""},
    {"type": "created-on-cluster", "at": at(0) + timedelta(seconds=2), "reason": ""},
    {"type": "created", "at": at(0) + timedelta(seconds=2), "reason": ""},
    {"type": "quota-reserved", "at": at(10), "reason": "QuotaReserved"},
    {"type": "admitted", "at": at(10), "reason": "Admitted"},
    {"type": "preempted", "at": at(70), "reason": "InCohortReclamation"},
    {"type": "evicted", "at": at(70), "reason": "Preempted"},
    {"type": "requeued", "at": at(71), "reason": "Preempted"},
    {"type": "quota-reserved", "at": at(100), "reason": ""},
    {"type": "admitted", "at": at(100), "reason": ""},
]
FAIR = [
    {"at": at(5 * i), "cluster_queue": q, "share": s + 0.01 * i}
    for i in range(3)
    for q, s in (("team-llm", 0.42), ("team-eval", 0.1))
]
COMPARE = [
    {"cluster_queue": "team-llm", "today": 120.0, "proposal": 45.0},
    {"cluster_queue": "team-eval", "today": 10.0, "proposal": 12.5},
    {"cluster_queue": "team-new", "today": None, "proposal": 3.0},
]

# Every builder with realistic input, as (name, build(rows), rows).
BUILDERS: list[tuple[str, Callable[[list[Any]], Chart], list[Any]]] = [
    ("capacity_over_time", charts.capacity_over_time, CAPACITY_SERIES),
    ("capacity_now", charts.capacity_now, CAPACITY_NOW),
    ("pending_by_queue", charts.pending_by_queue, PENDING),
    ("worst_waits", charts.worst_waits, WAITS),
    ("preemptions_by_reason", charts.preemptions_by_reason, PREEMPTIONS),
    ("queue_quota", charts.queue_quota, QUOTA),
    ("usage_over_time", charts.usage_over_time, USAGE),
    ("wait_distribution", charts.wait_distribution, BUCKETS),
    ("wait_trend", charts.wait_trend, TREND),
    ("job_timeline", lambda rows: charts.job_timeline(rows, at(130)), EVENTS),
    ("fair_share_over_time", charts.fair_share_over_time, FAIR),
    ("comparison", lambda rows: charts.comparison(rows, "p95 wait (min)", unit="min"), COMPARE),
]
IDS = [name for name, _, _ in BUILDERS]


# --- what every chart does ------------------------------------------------------


@pytest.mark.parametrize(("name", "build", "rows"), BUILDERS, ids=IDS)
def test_every_chart_is_valid_and_names_itself(name: str, build: Any, rows: list[Any]) -> None:
    chart = valid(build(rows))
    assert chart.empty is False
    assert chart.figure["layout"]["meta"] == {"chart": name, "empty": False}
    assert chart.figure["layout"]["uirevision"] == name
    assert chart.figure["data"] and chart.table.rows
    for trace in chart.figure["data"]:
        if trace["type"] != "heatmap":
            assert "hovertemplate" in trace, trace["name"]


@pytest.mark.parametrize(("name", "build", "rows"), BUILDERS, ids=IDS)
def test_the_same_rows_in_any_order_give_the_same_json(
    name: str, build: Any, rows: list[Any]
) -> None:
    first = build(rows).figure_json()
    assert build(list(rows)).figure_json() == first
    for seed in range(3):
        shuffled = list(rows)
        random.Random(seed).shuffle(shuffled)
        again = build(shuffled)
        assert again.figure_json() == first
        assert again.table == build(rows).table


@pytest.mark.parametrize(("name", "build", "rows"), BUILDERS, ids=IDS)
def test_no_rows_is_an_annotated_empty_figure(name: str, build: Any, rows: list[Any]) -> None:
    chart = valid(build([]))
    assert chart.empty is True
    assert chart.figure["data"] == []
    layout = chart.figure["layout"]
    assert layout["meta"] == {"chart": name, "empty": True}
    assert [a["text"] for a in layout["annotations"]] == ["No data yet"]
    assert chart.table.rows == [] and chart.table.headers
    # Same headers as with data: the fallback's shape does not depend on the rows.
    assert chart.table.headers == build(rows).table.headers


@dataclass(frozen=True)
class PendingRow:
    cluster_queue: str
    pending_workloads: int
    requested_gpus: int


def test_rows_may_be_dataclasses_as_well_as_dicts() -> None:
    as_objects = [PendingRow(**row) for row in PENDING]
    assert charts.pending_by_queue(as_objects) == charts.pending_by_queue(PENDING)


def test_a_name_has_one_colour_on_every_chart() -> None:
    spot = colour_for("h100-spot")
    assert spot in charts.PALETTE
    capacity = traces(charts.capacity_over_time(CAPACITY_SERIES))
    assert capacity["h100-spot allocated"]["line"]["color"] == spot
    assert capacity["h100-spot capacity"]["line"]["color"] == spot
    assert traces(charts.usage_over_time(USAGE))["h100-spot"]["line"]["color"] == spot

    pending = charts.pending_by_queue(PENDING).figure["data"][0]
    by_queue = dict(zip(pending["y"], pending["marker"]["color"], strict=True))
    fair = traces(charts.fair_share_over_time(FAIR))
    waits = charts.worst_waits(WAITS).figure["data"][0]
    waits_by_queue = dict(zip(waits["y"], waits["marker"]["color"], strict=True))
    for queue in ("team-llm", "team-eval"):
        assert by_queue[queue] == fair[queue]["line"]["color"] == waits_by_queue[queue]
        assert by_queue[queue] == colour_for(queue)


def test_colours_do_not_depend_on_the_process_hash_seed() -> None:
    code = "from frontend.charts import colour_for; print(colour_for('team-llm'))"
    seen = {
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("0", "1", "12345")
    }
    assert seen == {colour_for("team-llm")}


def test_the_module_imports_neither_django_nor_kubernetes_nor_plotly() -> None:
    code = (
        "import json, sys, frontend.charts; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    loaded = set(json.loads(out))
    assert "frontend" in loaded
    assert not loaded & {"django", "kubernetes", "rest_framework", "celery", "plotly"}


def test_figure_json_is_compact_canonical_and_script_safe() -> None:
    chart = charts.job_timeline(
        [{"type": "failed", "at": at(0), "reason": "</script><b>OOM & co"}], at(1)
    )
    text = chart.figure_json()
    # The reason is plotly text, escaped once for hover; the JSON escapes < > & again.
    assert "</script>" not in text and "\\u0026lt;/script\\u0026gt;" in text
    assert chart.table.rows[0][-1] == "</script><b>OOM & co"  # the template escapes tables
    raw = Chart({"name": "</script>&"}, Table([], []), False).figure_json()
    assert raw == '{"name":"\\u003c/script\\u003e\\u0026"}'
    assert json.loads(text) == chart.figure
    assert text == Chart(json.loads(text), chart.table, False).figure_json()
    # Only dates get the str fallback; anything else still fails loudly.
    moment = Chart(
        {"x": [datetime(2026, 1, 2, 3, 4, 5)], "d": date(2026, 1, 2)}, Table([], []), False
    )
    assert moment.figure_json() == '{"d":"2026-01-02","x":["2026-01-02T03:04:05Z"]}'
    with pytest.raises(TypeError):
        Chart({"x": object()}, Table([], []), False).figure_json()


def test_times_are_iso_utc_with_z_whatever_the_input_zone() -> None:
    plus_two = timezone(timedelta(hours=2))
    rows = [
        {"at": datetime(2026, 11, 30, 14, 0, tzinfo=plus_two), "cluster_queue": "q", "share": 0.5},
        {"at": datetime(2026, 11, 30, 12, 5), "cluster_queue": "q", "share": 0.6},  # naive = UTC
        {"at": datetime(2026, 11, 30, 12, 10, 0, 250000, tzinfo=UTC), "cluster_queue": "q",
         "share": 0.7},
    ]  # fmt: skip
    line = valid(charts.fair_share_over_time(rows)).figure["data"][0]
    assert line["x"] == ["2026-11-30T12:00:00Z", "2026-11-30T12:05:00Z", "2026-11-30T12:10:00.250Z"]


# --- the builders one by one ------------------------------------------------------


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


def test_queue_quota_has_a_row_per_resource_in_its_own_unit() -> None:
    chart = valid(charts.queue_quota(QUOTA))
    layout = chart.figure["layout"]
    # GPUs first, then cpu, then memory; each y axis titled in Kubernetes words.
    assert [title(layout[k]) for k in ("yaxis", "yaxis2", "yaxis3")] == [
        "GPUs",
        "CPU (cores)",
        "memory (GiB)",
    ]
    domains = [layout[k]["domain"] for k in ("yaxis", "yaxis2", "yaxis3")]
    assert all(lo < hi for lo, hi in domains)
    assert domains[0][0] > domains[1][1] and domains[1][0] > domains[2][1]  # no overlap
    data = chart.figure["data"]
    assert [t["name"] for t in data[:4]] == ["nominal", "usage", "borrowed", "lent"]
    assert [t["showlegend"] for t in data] == [True] * 4 + [False] * 8
    gpu_usage, cpu_usage, memory_usage = (t for t in data if t["name"] == "usage")
    assert (gpu_usage["yaxis"], cpu_usage["yaxis"], memory_usage["yaxis"]) == ("y", "y2", "y3")
    assert gpu_usage["x"] == ["h100-ondemand", "h100-spot"] and gpu_usage["y"] == [20, 0]
    assert cpu_usage["y"] == [12.5] and cpu_usage["customdata"] == [["12500m", "cpu"]]
    assert memory_usage["y"] == [96.0] and memory_usage["customdata"] == [["96Gi", "memory"]]
    assert "cores" in cpu_usage["hovertemplate"] and "GiB" in memory_usage["hovertemplate"]
    assert layout["xaxis2"]["categoryarray"] == ["h100-ondemand", "h100-spot"]
    assert chart.table.headers == ["flavor", "resource", "nominal", "usage", "borrowed", "lent"]
    assert chart.table.rows == [
        ["h100-ondemand", "nvidia.com/gpu", "16", "20", "4", "0"],
        ["h100-spot", "nvidia.com/gpu", "8", "0", "0", "8"],
        ["h100-ondemand", "cpu", "64", "12500m", "0", "0"],
        ["h100-ondemand", "memory", "512Gi", "96Gi", "0", "0"],
    ]


def test_usage_over_time_stacks_flavors_under_total_nominal_and_borrowed() -> None:
    chart = valid(charts.usage_over_time(USAGE))
    assert [t["name"] for t in chart.figure["data"]] == [
        "h100-ondemand",
        "h100-spot",
        "nominal quota",
        "borrowed",
    ]
    by_name = traces(chart)
    assert by_name["h100-ondemand"]["stackgroup"] == by_name["h100-spot"]["stackgroup"]
    assert by_name["h100-ondemand"]["y"] == [12, 13, 14]
    assert by_name["nominal quota"]["y"] == [24, 24, 24]
    assert by_name["nominal quota"]["line"]["dash"] == "dash"
    assert by_name["borrowed"]["y"] == [0, 1, 2]
    assert "stackgroup" not in by_name["borrowed"]
    assert all("GPUs" in t["hovertemplate"] for t in chart.figure["data"])
    assert title(chart.figure["layout"]["yaxis"]) == "GPUs"
    assert chart.table.headers[2:] == ["usage (GPUs)", "borrowed (GPUs)", "nominal (GPUs)"]
    assert chart.table.rows[0] == ["2026-11-30 12:00", "h100-ondemand", "12", "0", "16"]

    cpu_rows = [{"at": at(0), "flavor": "cpu-pool", "usage": 1500, "borrowed": 0, "nominal": 4000}]
    cpu = valid(charts.usage_over_time(cpu_rows, resource="cpu"))
    assert title(cpu.figure["layout"]["yaxis"]) == "CPU (cores)"
    assert traces(cpu)["cpu-pool"]["y"] == [1.5]
    assert cpu.table.rows == [["2026-11-30 12:00", "cpu-pool", "1500m", "0", "4"]]


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


def test_job_timeline_draws_phases_as_dated_bars_and_events_as_markers() -> None:
    chart = valid(charts.job_timeline(EVENTS, at(130)))
    by_name = traces(chart)
    # Quota reserved and admitted at one instant: no zero-length "reserved" bar.
    assert list(by_name) == [
        "submitting",
        "waiting",
        "running",
        "stopping",
        "steps",
        "evicted or preempted",
        "requeued",
    ]
    waiting = by_name["waiting"]
    assert waiting["orientation"] == "h" and waiting["type"] == "bar"
    # The first wait (created → quota reserved) and the wait after the requeue.
    assert waiting["base"] == ["2026-11-30T12:00:02Z", "2026-11-30T13:11:00Z"]
    assert waiting["x"] == [(10 * 60 - 2) * 1000, 29 * 60 * 1000]
    running = by_name["running"]
    assert running["base"] == ["2026-11-30T12:10:00Z", "2026-11-30T13:40:00Z"]
    assert running["x"] == [60 * 60 * 1000, 30 * 60 * 1000]
    assert running["customdata"][-1][1] == "now"  # still running at `now`
    stopping = by_name["stopping"]
    assert stopping["x"] == [60 * 1000]
    assert stopping["customdata"][0][3] == "<br>InCohortReclamation"
    assert chart.figure["layout"]["xaxis"]["type"] == "date"
    preempted = by_name["evicted or preempted"]
    assert preempted["mode"] == "markers"
    assert [c[0] for c in preempted["customdata"]] == ["preempted", "evicted"]
    assert preempted["customdata"][0][2] == "<br>InCohortReclamation"
    phase_rows = [r for r in chart.table.rows if r[1] != "—"]
    assert [(r[2], r[3]) for r in phase_rows] == [
        ("submitting", "2 s"),
        ("waiting", "9 min 58 s"),
        ("running", "1 h"),
        ("stopping", "1 min"),
        ("waiting", "29 min"),
        ("running", "30 min"),
    ]
    assert chart.table.rows[0] == ["2026-11-30 12:00:00", "—", "submitted", "—", ""]


def test_job_timeline_ends_at_a_terminal_event_and_escapes_reasons() -> None:
    events = [
        {"type": "created", "at": at(0), "reason": ""},
        {"type": "quota-reserved", "at": at(5), "reason": ""},
        {"type": "check-state", "at": at(6), "reason": "urgent-release: Pending"},
        {"type": "admitted", "at": at(9), "reason": ""},
        {"type": "finished", "at": at(60), "reason": "Succeeded <ok>"},
        {"type": "deleted", "at": at(90), "reason": ""},
        {"type": "something-new", "at": at(95), "reason": "future Kueue"},
    ]
    chart = valid(charts.job_timeline(events, at(500)))
    by_name = traces(chart)
    assert by_name["reserved"]["x"] == [4 * 60 * 1000]
    assert by_name["running"]["x"] == [51 * 60 * 1000]  # to `finished`, not to now
    assert all(cd[1] != "now" for t in chart.figure["data"] if t["type"] == "bar"
               for cd in t["customdata"])  # fmt: skip
    assert by_name["finished"]["marker"]["symbol"] == "star"
    assert by_name["finished"]["customdata"] == [
        ["finished", "2026-11-30 13:00:00", "<br>Succeeded &lt;ok&gt;"]
    ]
    steps = [c[0] for c in by_name["steps"]["customdata"]]
    assert steps == ["created", "quota-reserved", "check-state", "admitted", "something-new"]
    assert ["2026-11-30 13:00:00", "—", "finished", "—", "Succeeded <ok>"] in chart.table.rows


def test_job_timeline_phases_follow_the_lifecycle() -> None:
    items = [(e["at"], e["type"], e["reason"]) for e in EVENTS]
    found = phases(items, at(130))
    assert [p.kind for p in found] == [
        "submitting",
        "waiting",
        "running",
        "stopping",
        "waiting",
        "running",
    ]
    assert all(a.end == b.start for a, b in itertools.pairwise(found))
    assert [p.ongoing for p in found] == [False] * 5 + [True]
    # A clock behind the last event: the open phase has no length, so no bar.
    behind = phases(items, at(50))
    assert behind[-1].kind == "waiting" and not any(p.ongoing for p in behind)
    deactivated = phases([(at(0), "created", ""), (at(5), "deactivated", "")], at(20))
    assert [(p.kind, p.ongoing) for p in deactivated] == [("waiting", False), ("inactive", True)]


def test_borrowing_heatmap_sorts_both_axes_and_lists_nonzero_pairs() -> None:
    chart = valid(
        charts.borrowing_heatmap(
            lenders=["team-vision", "team-eval"],
            borrowers=["team-llm", "team-eval"],
            gpu_hours=[[12.5, 3.0], [0.0, None]],
        )
    )
    (heat,) = chart.figure["data"]
    assert heat["x"] == ["team-eval", "team-vision"]
    assert heat["y"] == ["team-eval", "team-llm"]
    assert heat["z"] == [[None, 0.0], [3.0, 12.5]]
    assert heat["text"] == [["", ""], ["3", "12.5"]]
    assert "GPU-hours" in heat["hovertemplate"]
    layout = chart.figure["layout"]
    assert title(layout["xaxis"]) == "lender" and title(layout["yaxis"]) == "borrower"
    assert chart.table.rows == [["team-llm", "team-vision", "12.5"], ["team-llm", "team-eval", "3"]]
    assert charts.borrowing_heatmap([], ["a"], [[]]).empty
    assert valid(charts.borrowing_heatmap([], [], [])).empty


def test_borrowing_heatmap_refuses_a_matrix_of_the_wrong_shape() -> None:
    with pytest.raises(ValueError, match="one row per borrower"):
        charts.borrowing_heatmap(["a", "b"], ["c"], [[1.0]])
    with pytest.raises(ValueError, match="must not repeat"):
        charts.borrowing_heatmap(["a", "a"], ["c"], [[1.0, 2.0]])


def test_fair_share_over_time_draws_a_line_per_queue() -> None:
    chart = valid(charts.fair_share_over_time(FAIR))
    assert [t["name"] for t in chart.figure["data"]] == ["team-eval", "team-llm"]
    llm = traces(chart)["team-llm"]
    assert llm["y"] == [0.42, 0.43, 0.44] and ".3f" in llm["hovertemplate"]
    assert title(chart.figure["layout"]["yaxis"]) == "weighted dominant resource share"
    assert chart.table.rows[0] == ["2026-11-30 12:00", "team-eval", "0.100"]


def test_comparison_sets_today_against_the_proposal() -> None:
    chart = valid(charts.comparison(COMPARE, "p95 wait (min)", unit="min"))
    today, proposal = chart.figure["data"]
    assert (today["name"], proposal["name"]) == ("today", "proposal")
    assert today["x"] == ["team-eval", "team-llm", "team-new"]
    assert today["y"] == [10.0, 120.0, None] and proposal["y"] == [12.5, 45.0, 3.0]
    assert today["hovertemplate"].endswith(" min<extra></extra>")
    assert chart.figure["layout"]["barmode"] == "group"
    assert title(chart.figure["layout"]["yaxis"]) == "p95 wait (min)"
    assert chart.table.headers == [
        "ClusterQueue",
        "today: p95 wait (min)",
        "proposal: p95 wait (min)",
        "change",
    ]
    assert chart.table.rows == [
        ["team-eval", "10", "12.50", "+2.50 (+25%)"],
        ["team-llm", "120", "45", "-75 (-62%)"],
        ["team-new", "—", "3", "—"],
    ]


# --- helpers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "—"),
        (0, "0 s"),
        (45.4, "45 s"),
        (270, "4 min 30 s"),
        (7200, "2 h"),
        (7503, "2 h 5 min"),
        (3 * 86400 + 4 * 3600 + 59, "3 d 4 h"),
        (-5, "0 s"),
    ],
)
def test_format_duration(seconds: float | None, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("resource", "title_", "scale"),
    [
        ("nvidia.com/gpu", "GPUs", 1),
        ("cpu", "CPU (cores)", 1000),
        ("memory", "memory (GiB)", GiB),
        ("ephemeral-storage", "ephemeral-storage (GiB)", GiB),
        ("pods", "pods", 1),
    ],
)
def test_resource_units_use_kubernetes_words(resource: str, title_: str, scale: int) -> None:
    unit = resource_unit(resource)
    assert (unit.title, unit.scale) == (title_, scale)


# --- properties -------------------------------------------------------------------

names = st.text(min_size=0, max_size=12)
moments = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2035, 1, 1), timezones=st.just(UTC)
) | st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2035, 1, 1))
amounts = st.none() | st.integers(min_value=0, max_value=2**40)
gpus = st.none() | st.integers(0, 4096) | st.floats(allow_nan=True, allow_infinity=True)
seconds = st.none() | st.floats(min_value=0, max_value=10**8) | st.just(math.nan)
PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def order_free(build: Callable[[list[Any]], Chart], rows: list[Any]) -> None:
    chart = valid(build(rows))
    assert chart.empty is (not rows)
    assert valid(build(list(reversed(rows)))).figure_json() == chart.figure_json()


@PROPERTY
@given(
    st.lists(
        st.fixed_dictionaries(
            {"at": moments, "flavor": names, "capacity": gpus, "allocated": gpus,
             "utilised": gpus}
        ),
        max_size=12,
    ),
    names,
)  # fmt: skip
def test_any_capacity_rows_make_a_valid_figure(rows: list[dict[str, Any]], source: str) -> None:
    order_free(lambda r: charts.capacity_over_time(r, utilisation_source=source), rows)
    order_free(charts.capacity_now, rows)


@PROPERTY
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "flavor": names,
                "resource": st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods"]) | names,
                "nominal": amounts,
                "usage": amounts,
                "borrowed": amounts,
                "lent": amounts,
            }
        ),
        max_size=10,
    )
)
def test_any_quota_rows_make_a_valid_figure(rows: list[dict[str, Any]]) -> None:
    order_free(charts.queue_quota, rows)


@PROPERTY
@given(
    st.lists(
        st.fixed_dictionaries({"cluster_queue": names, "p50_seconds": seconds,
                               "p95_seconds": seconds}),
        max_size=10,
    ),
    st.lists(
        st.fixed_dictionaries(
            {"le": st.floats(min_value=0, max_value=10**7) | st.just(math.inf),
             "count": st.integers(0, 10**6)}
        ),
        max_size=10,
    ),
)  # fmt: skip
def test_any_wait_rows_make_a_valid_figure(
    waits: list[dict[str, Any]], buckets: list[dict[str, Any]]
) -> None:
    order_free(charts.worst_waits, waits)
    order_free(charts.wait_distribution, buckets)


EVENT_TYPES = [
    "submitted", "created-on-cluster", "created", "quota-reserved", "check-state", "admitted",
    "evicted", "preempted", "requeued", "finished", "failed", "deactivated", "deleted",
    "cancelled",
]  # fmt: skip


@PROPERTY
@given(
    st.lists(
        st.fixed_dictionaries(
            {"type": st.sampled_from(EVENT_TYPES) | names, "at": moments, "reason": names}
        ),
        max_size=15,
    ),
    moments,
)
def test_any_events_make_a_valid_timeline_of_disjoint_phases(
    events: list[dict[str, Any]], now: datetime
) -> None:
    order_free(lambda e: charts.job_timeline(e, now), events)
    chart = charts.job_timeline(events, now)
    spans = sorted(
        (datetime.fromisoformat(base), ms)
        for t in chart.figure["data"]
        if t["type"] == "bar"
        for base, ms in zip(t["base"], t["x"], strict=True)
    )
    assert all(ms > 0 for _, ms in spans)
    for (start, ms), (next_start, _) in itertools.pairwise(spans):
        assert start + timedelta(milliseconds=ms) <= next_start


@PROPERTY
@given(
    st.lists(st.text(min_size=1, max_size=8), unique=True, max_size=5),
    st.lists(st.text(min_size=1, max_size=8), unique=True, max_size=5),
    st.data(),
)
def test_any_borrowing_matrix_makes_a_valid_heatmap(
    lenders: list[str], borrowers: list[str], data: st.DataObject
) -> None:
    matrix = [
        data.draw(st.lists(st.none() | st.floats(min_value=0, max_value=10**6),
                           min_size=len(lenders), max_size=len(lenders)))
        for _ in borrowers
    ]  # fmt: skip
    chart = valid(charts.borrowing_heatmap(lenders, borrowers, matrix))
    assert chart.empty is (not lenders or not borrowers)
    assert len(chart.table.rows) == sum(1 for row in matrix for v in row if v)
