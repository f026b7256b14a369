"""Property tests of the chart builders: whatever rows hypothesis makes up
(empty names, naive and aware times, missing, huge, NaN or infinite figures,
unknown event types), every builder gives a figure that ``valid`` accepts,
the same for the rows reversed; job timelines have disjoint phases of positive
length; and a borrowing matrix of any size makes a valid heatmap. Pure: no
database."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frontend import charts
from frontend.charts import Chart
from tests.frontend.chart_support import valid

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
