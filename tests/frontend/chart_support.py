"""What the chart tests (``test_chart*.py``) share: realistic rows for every
builder in frontend.charts, the builders with those rows as parameters, and
``valid``, the checks every figure must pass (plotly's own validator, since
``plotly.graph_objects.Figure`` raises on an invalid property; JSON that
round-trips and is safe in HTML; a dashboard-sized layout; a table fallback).
Pure: no database. Not a test module itself."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import plotly.graph_objects as go

from frontend import charts
from frontend.charts import Chart, Table

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
