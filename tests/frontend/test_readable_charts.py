"""Charts that say something, in the words the rest of Berth uses: seconds as
seconds, one hourly sample is said to be too little, a heatmap cell and its
table agree, a trend starts at its data, a job's timeline keeps its order and a
readable scale."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from frontend import charts
from frontend.charts._core import format_duration, time_scale
from frontend.templatetags.berth import duration as duration_filter

T0 = datetime(2026, 12, 1, 12, 59, 59, tzinfo=UTC)


def test_one_duration_everywhere() -> None:
    assert duration_filter(100_000) == format_duration(100_000) == "1 d 3 h"


def test_short_waits_are_drawn_in_seconds() -> None:
    scale = time_scale([10.0, 4.0])
    assert (scale.divisor, scale.unit) == (1, "s")
    chart = charts.worst_waits([{"cluster_queue": "q", "p50_seconds": 4.0, "p95_seconds": 10.0}])
    [bar, _] = chart.figure["data"]
    assert bar["x"] == [10.0]
    assert chart.figure["layout"]["xaxis"]["ticksuffix"] == " s"


def test_one_hourly_share_sample_says_so_instead_of_an_empty_frame() -> None:
    chart = charts.fair_share_over_time([{"at": T0, "cluster_queue": "research", "share": 0.125}])
    assert chart.empty and "One hourly sample so far" in chart.message
    two = charts.fair_share_over_time(
        [
            {"at": T0, "cluster_queue": "research", "share": 0.125},
            {"at": T0 + timedelta(hours=1), "cluster_queue": "research", "share": 0.25},
        ]
    )
    assert not two.empty and two.figure["data"][0]["mode"] == "lines+markers"


def test_a_heatmap_cell_reads_as_its_table_row() -> None:
    chart = charts.borrowing_heatmap(["serving"], ["research"], [[0.01]])
    [heat] = chart.figure["data"]
    assert heat["text"] == [["0.01"]]
    assert chart.table.rows == [["research", "serving", "0.01"]]
    tiny = charts.borrowing_heatmap(["serving"], ["research"], [[0.001]])
    assert tiny.figure["data"][0]["text"] == [["< 0.01"]]


def test_the_daily_trend_starts_at_the_first_day_with_data() -> None:
    rows = [
        {
            "day": date(2026, 11, 18) + timedelta(days=n),
            "p50_seconds": None,
            "p95_seconds": None,
            "admissions": 0,
        }
        for n in range(13)
    ] + [{"day": date(2026, 12, 1), "p50_seconds": 60.0, "p95_seconds": 300.0, "admissions": 4}]
    chart = charts.wait_trend(rows)
    assert chart.figure["data"][0]["x"] == ["2026-12-01"]


def test_a_job_timeline_never_shows_the_cluster_before_the_submission() -> None:
    submitted = T0 + timedelta(microseconds=669_060)
    events = [
        {"type": "submitted", "at": submitted, "reason": ""},
        {"type": "created-on-cluster", "at": submitted + timedelta(milliseconds=200), "reason": ""},
        {"type": "created", "at": T0, "reason": ""},  # Kueue's times are to the second
        {"type": "quota-reserved", "at": T0, "reason": "QuotaReserved"},
    ]
    chart = charts.job_timeline(events, now=T0 + timedelta(seconds=2))
    kinds = [row[2] for row in chart.table.rows if row[1] == "—"]
    assert kinds == ["submitted", "created-on-cluster", "created", "quota-reserved"]
    # A two-second life is drawn on a minute, not stretched into 20 ms ticks.
    start, end = chart.figure["layout"]["xaxis"]["range"]
    span = datetime.fromisoformat(end.rstrip("Z")) - datetime.fromisoformat(start.rstrip("Z"))
    assert span == timedelta(minutes=1)


def test_a_few_seconds_of_capacity_samples_get_a_ten_minute_axis() -> None:
    rows = [
        {"at": T0 + timedelta(seconds=n), "flavor": "h100", "capacity": 32, "allocated": 12,
         "utilised": None}
        for n in range(3)
    ]  # fmt: skip
    start, end = charts.capacity_over_time(rows).figure["layout"]["xaxis"]["range"]
    assert datetime.fromisoformat(end.rstrip("Z")) - datetime.fromisoformat(
        start.rstrip("Z")
    ) == timedelta(minutes=10)
