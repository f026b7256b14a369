"""Wait-time charts: the worst queues, the distribution of waits, the daily trend."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import date, datetime
from typing import Any

from frontend.charts._core import (
    SERIES_COLOURS,
    Chart,
    Num,
    Table,
    axis,
    bound_label,
    category_axis,
    category_height,
    chart,
    colour_for,
    date_axis,
    empty_chart,
    field,
    fmt,
    format_duration,
    hover,
    layout,
    num,
    row_key,
    scaled,
    text,
    time_scale,
    utc,
)


def worst_waits(rows: Iterable[Any]) -> Chart:
    """Time to admission per ClusterQueue: a bar to the p95, a marker at the p50,
    longest p95 first; minutes while the longest wait is under 3 h, else hours.

    rows: ``{"cluster_queue", "p50_seconds": float | None, "p95_seconds": float | None}``.
    """
    name = "worst_waits"
    headers = ["ClusterQueue", "p50 wait", "p95 wait"]
    items = sorted(
        (
            (
                text(field(r, "cluster_queue")),
                num(field(r, "p50_seconds")),
                num(field(r, "p95_seconds")),
            )
            for r in rows
        ),
        key=lambda i: (i[2] is None, -(i[2] or 0), i[1] is None, -(i[1] or 0), i[0]),
    )
    if not items:
        return empty_chart(name, headers)
    scale = time_scale(v for i in items for v in i[1:])
    queues = [i[0] for i in items]
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": "p95",
            "y": queues,
            "x": [scaled(i[2], scale.divisor) for i in items],
            "customdata": [[format_duration(i[2])] for i in items],
            "marker": {"color": [colour_for(q) for q in queues]},
            "hovertemplate": hover("%{y}", "p95 wait: %{customdata[0]}"),
        },
        {
            "type": "scatter",
            "mode": "markers",
            "name": "p50",
            "y": queues,
            "x": [scaled(i[1], scale.divisor) for i in items],
            "customdata": [[format_duration(i[1])] for i in items],
            "marker": {
                "color": SERIES_COLOURS["p50"],
                "symbol": "diamond",
                "size": 9,
                "line": {"color": "#ffffff", "width": 1},
            },
            "hovertemplate": hover("%{y}", "p50 wait: %{customdata[0]}"),
        },
    ]
    spec = layout(
        name,
        category_height(len(items)),
        xaxis=axis(
            f"time to admission ({scale.title})", rangemode="tozero", ticksuffix=f" {scale.unit}"
        ),
        yaxis=category_axis(reversed_=True),
    )
    table_rows = [[q, format_duration(p50), format_duration(p95)] for q, p50, p95 in items]
    return chart(data, spec, Table(headers, table_rows))


def _bucket_bound(value: Any) -> float | None:
    if isinstance(value, float | int) and not isinstance(value, bool) and value == math.inf:
        return math.inf
    bound = num(value)
    return None if bound is None or bound < 0 else float(bound)


def wait_distribution(buckets: Iterable[Any]) -> Chart:
    """How many workloads waited how long: one bar per histogram bucket, labelled
    ``≤ 1 min`` … ``> 1 d`` (counts per bucket, not cumulative). Buckets whose
    bounds read the same are added together.

    buckets: ``{"le": float (seconds; math.inf for the last), "count": int}``.
    """
    name = "wait_distribution"
    headers = ["wait", "workloads", "share"]
    items = sorted(
        (
            (bound, num(field(b, "count")) or 0)
            for b in buckets
            if (bound := _bucket_bound(field(b, "le"))) is not None
        ),
        key=row_key,
    )
    if not items:
        return empty_chart(name, headers)
    largest = max((le for le, _ in items if le != math.inf), default=None)
    counts: dict[str, int | float] = {}
    for le, count in items:
        if le != math.inf:
            label = f"≤ {bound_label(le)}"
        else:
            label = "any wait" if largest is None else f"> {bound_label(largest)}"
        counts[label] = counts.get(label, 0) + count
    labels = list(counts)
    total = sum(counts.values())
    data = [
        {
            "type": "bar",
            "name": "workloads",
            "x": labels,
            "y": [counts[label] for label in labels],
            "text": [fmt(counts[label]) for label in labels],
            "textposition": "outside",
            "cliponaxis": False,
            "marker": {"color": SERIES_COLOURS["workloads"]},
            "hovertemplate": hover("waited %{x}", "%{y:,} workloads"),
        }
    ]
    spec = layout(
        name,
        showlegend=False,
        xaxis=category_axis("time to admission"),
        yaxis=axis("workloads", rangemode="tozero"),
    )
    table_rows = [
        [label, fmt(count), f"{count / total:.0%}" if total else "—"]
        for label, count in counts.items()
    ]
    return chart(data, spec, Table(headers, table_rows))


DAY_MS = 86_400_000


def _day(value: Any) -> date | None:
    if isinstance(value, datetime):
        return utc(value).date()
    return value if isinstance(value, date) else None


def wait_trend(rows: Iterable[Any]) -> Chart:
    """Daily p50 and p95 time to admission (lines, left axis) over the
    admissions per day (bars, right axis).

    rows: ``{"day": date, "p50_seconds", "p95_seconds", "admissions"}``.
    """
    name = "wait_trend"
    headers = ["day", "p50 wait", "p95 wait", "admissions"]
    items: list[tuple[date, Num, Num, Num]] = sorted(
        (
            (
                day,
                num(field(r, "p50_seconds")),
                num(field(r, "p95_seconds")),
                num(field(r, "admissions")),
            )
            for r in rows
            if (day := _day(field(r, "day"))) is not None
        ),
        key=row_key,
    )
    # From the first day with admissions: a queue with one day of history is
    # not drawn across two weeks of nothing.
    first = next((n for n, i in enumerate(items) if i[3] or i[1] is not None), None)
    if first is None:
        return empty_chart(name, headers)
    items = items[first:]
    scale = time_scale(v for i in items for v in i[1:3])
    days = [i[0].isoformat() for i in items]
    data: list[dict[str, Any]] = [
        {
            "type": "bar",
            "name": "admissions",
            "x": days,
            "y": [i[3] for i in items],
            "marker": {"color": SERIES_COLOURS["admissions"]},
            "hovertemplate": "admissions: %{y:,}<extra></extra>",
        }
    ]
    for label, values in (("p50", [i[1] for i in items]), ("p95", [i[2] for i in items])):
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": f"{label} wait",
                "x": days,
                "y": [scaled(v, scale.divisor) for v in values],
                "yaxis": "y2",
                "customdata": [[format_duration(v)] for v in values],
                "line": {"color": SERIES_COLOURS[label], "width": 2},
                "marker": {"size": 5},
                "hovertemplate": f"{label} wait: %{{customdata[0]}}<extra></extra>",
            }
        )
    # A tick a day for two weeks, then every few days; never a 12:00 tick.
    span = (items[-1][0] - items[0][0]).days + 1
    # The lines sit on the overlaying axis, which plotly draws above the bars.
    spec = layout(
        name,
        xaxis=date_axis(
            "day (UTC)", hoverformat="%Y-%m-%d", tickformat="%b %-d", dtick=DAY_MS * -(-span // 14)
        ),
        yaxis=axis("admissions", side="right", rangemode="tozero", showgrid=False),
        yaxis2=axis(
            f"time to admission ({scale.title})",
            overlaying="y",
            side="left",
            tickmode="auto",  # not "sync": its own round ticks, and the only grid
            showgrid=True,
            rangemode="tozero",
            ticksuffix=f" {scale.unit}",
        ),
        hovermode="x unified",
    )
    table_rows = [
        [d.isoformat(), format_duration(p50), format_duration(p95), fmt(n)]
        for d, p50, p95, n in items
    ]
    return chart(data, spec, Table(headers, table_rows))
