"""The gang-fit chart and its formats (frontend.charts.gang_fit, pure): free
GPUs on whole nodes and stranded ones stacked, the stranded share on its own
axis, a table of the same numbers with no raw float, and the same JSON from
the same rows in any order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from frontend.charts.gang_fit import format_share, fragmentation_over_time, gang_text

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
ROWS = [
    {"at": T0, "free_gpus": 48, "stranded_gpus": 0},
    {"at": T0 + timedelta(minutes=30), "free_gpus": 32, "stranded_gpus": 16},
    {"at": T0 + timedelta(minutes=60), "free_gpus": 0, "stranded_gpus": 0},
]


def test_free_gpus_split_into_whole_and_stranded_with_the_share() -> None:
    chart = fragmentation_over_time(ROWS, "h100")
    whole, stranded, share = chart.figure["data"]
    assert whole["y"] == [48, 16, 0] and stranded["y"] == [0, 16, 0]
    assert share["y"] == [0.0, 0.5, 0.0] and share["yaxis"] == "y2"
    assert chart.table.rows[1][1:] == ["32", "16", "16", "50 %"]
    assert chart.figure["layout"]["yaxis2"]["range"] == [0, 1]


def test_rows_in_any_order_give_the_same_chart() -> None:
    forward = fragmentation_over_time(ROWS, "h100")
    backward = fragmentation_over_time(list(reversed(ROWS)), "h100")
    assert forward.figure_json() == backward.figure_json()


def test_no_rows_say_so() -> None:
    chart = fragmentation_over_time([], "h100")
    assert chart.empty


def test_formats() -> None:
    assert format_share(0.6) == "60 %"
    assert format_share(None) == "—"
    assert gang_text(3, 8) == "3 × 8"
    assert gang_text(1200, 1) == "1,200 × 1"
    assert gang_text(0, 8) == "—"
