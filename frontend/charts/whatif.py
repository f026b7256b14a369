"""The what-if simulator's side-by-side: today's policy against a proposal."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from frontend.charts._core import (
    DASH,
    SERIES_COLOURS,
    Chart,
    Table,
    axis,
    category_axis,
    chart,
    empty_chart,
    field,
    fmt,
    hover,
    layout,
    num,
    row_key,
    text,
)


def _change(today: float | None, proposal: float | None) -> str:
    if today is None or proposal is None:
        return DASH
    delta = proposal - today
    shown = "0" if delta == 0 else f"{'+' if delta > 0 else '-'}{fmt(abs(delta), 2)}"
    return f"{shown} ({delta / today:+.0%})" if today else shown


def comparison(rows: Iterable[Any], metric_label: str, *, unit: str = "") -> Chart:
    """One metric per ClusterQueue under today's policy and under the proposal,
    as grouped bars; the table adds the change.

    rows: ``{"cluster_queue", "today": float | None, "proposal": float | None}``,
    and optionally ``"change"``: what the table says instead of the difference
    (when the difference would claim too much, say because the proposal leaves
    workloads unadmitted); ``metric_label`` titles the axis ("p95 wait (min)"),
    ``unit`` follows values in the hover ("min").
    """
    name = "comparison"
    headers = ["ClusterQueue", f"today: {metric_label}", f"proposal: {metric_label}", "change"]
    items = sorted(
        (
            (
                text(field(r, "cluster_queue")),
                num(field(r, "today")),
                num(field(r, "proposal")),
                field(r, "change"),
            )
            for r in rows
        ),
        key=lambda i: row_key(i[:3]),
    )
    if not items:
        return empty_chart(name, headers)
    queues = [i[0] for i in items]
    suffix = f" {unit}" if unit else ""
    data = [
        {
            "type": "bar",
            "name": label,
            "x": queues,
            "y": [i[index] for i in items],
            "marker": {"color": SERIES_COLOURS[label]},
            "hovertemplate": hover("%{x}", f"{label}: %{{y:,.2~f}}{suffix}"),
        }
        for label, index in (("today", 1), ("proposal", 2))
    ]
    spec = layout(
        name,
        barmode="group",
        xaxis=category_axis(),
        yaxis=axis(metric_label, rangemode="tozero"),
    )
    table_rows = [
        [q, fmt(t, 2), fmt(p, 2), text(change) if change else _change(t, p)]
        for q, t, p, change in items
    ]
    return chart(data, spec, Table(headers, table_rows))
