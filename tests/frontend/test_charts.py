"""What holds for every chart builder in frontend.charts, whatever it draws:
plotly accepts the figure and it names itself, the same rows in any order give
the same JSON, no rows give an annotated empty figure with the same table
headers, a name has one colour on every chart (whatever the hash seed), the
JSON is compact and script-safe, times are ISO UTC; and the duration and unit
helpers. The builders one by one are in ``test_chart_*.py``, the rows they
share in ``chart_support``. Pure: no database."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from frontend import charts
from frontend.charts import Chart, Table, colour_for, format_duration, resource_unit
from tests.frontend.chart_support import (
    BUILDERS,
    CAPACITY_SERIES,
    FAIR,
    IDS,
    PENDING,
    USAGE,
    WAITS,
    GiB,
    at,
    traces,
    valid,
)

ROOT = Path(__file__).resolve().parents[2]


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
