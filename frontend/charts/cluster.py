"""Cluster-wide charts: GPU capacity, pending demand, preemptions, borrowing
between ClusterQueues and fair share."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from frontend.charts._core import (
    DASH,
    SERIES_COLOURS,
    Chart,
    Num,
    Table,
    axis,
    category_axis,
    category_height,
    chart,
    colour_for,
    date_axis,
    empty_chart,
    field,
    fmt,
    format_gpu_hours,
    hover,
    iso,
    layout,
    moment,
    num,
    row_key,
    text,
    time_range,
    when,
)

GPU_HOVER = "%{fullData.name}: %{y:,.1~f} GPUs<extra></extra>"


class _Capacity(NamedTuple):
    flavor: str
    capacity: Num
    allocated: Num
    utilised: Num

    @classmethod
    def of(cls, row: Any) -> _Capacity:
        return cls(
            text(field(row, "flavor")),
            num(field(row, "capacity")),
            num(field(row, "allocated")),
            num(field(row, "utilised")),
        )


class _Snapshot(NamedTuple):
    at: datetime
    flavor: str
    capacity: Num
    allocated: Num
    utilised: Num


def _utilised_label(source: str) -> str:
    return f"utilised ({source})" if source else "utilised"


def capacity_over_time(rows: Iterable[Any], *, utilisation_source: str = "") -> Chart:
    """GPUs per flavor over time: allocated (solid), capacity (dashed) and, where
    known, utilised (dotted; ``utilisation_source="simulated"`` says so in the legend).

    rows: ``{"at": datetime, "flavor", "capacity", "allocated", "utilised": float | None}``.
    """
    name = "capacity_over_time"
    utilised = _utilised_label(utilisation_source)
    headers = ["time (UTC)", "flavor", "capacity (GPUs)", "allocated (GPUs)", f"{utilised} (GPUs)"]
    points = sorted(
        (
            _Snapshot(at, *_Capacity.of(r))
            for r in rows
            if (at := moment(field(r, "at"))) is not None
        ),
        key=row_key,
    )
    if not points:
        return empty_chart(name, headers)
    by_flavor: dict[str, list[_Snapshot]] = defaultdict(list)
    for point in points:
        by_flavor[point.flavor].append(point)
    data: list[dict[str, Any]] = []
    for flavor, series in sorted(by_flavor.items()):
        xs = [iso(p.at) for p in series]
        colour = colour_for(flavor)
        # (legend label, field index in _Snapshot, dash, line shape)
        lines = [("allocated", 3, "solid", "hv"), ("capacity", 2, "dash", "hv")]
        if any(p.utilised is not None for p in series):
            lines.append((utilised, 4, "dot", "linear"))
        for label, index, dash, shape in lines:
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": f"{flavor} {label}",
                    "legendgroup": flavor,
                    "x": xs,
                    "y": [p[index] for p in series],
                    "line": {"color": colour, "dash": dash, "width": 2, "shape": shape},
                    "connectgaps": False,
                    "hovertemplate": GPU_HOVER,
                }
            )
    span = time_range((p.at for p in points), timedelta(minutes=10))
    spec = layout(
        name,
        xaxis=date_axis(hoverformat="%Y-%m-%d %H:%M UTC", range=span),
        yaxis=axis("GPUs", rangemode="tozero"),
        hovermode="x unified",
    )
    table_rows = [
        [when(p.at), p.flavor, fmt(p.capacity), fmt(p.allocated), fmt(p.utilised)] for p in points
    ]
    return chart(data, spec, Table(headers, table_rows))


def capacity_now(rows: Iterable[Any], *, utilisation_source: str = "") -> Chart:
    """GPUs per flavor now: capacity, allocated and (where known) utilised as
    grouped horizontal bars; the allocated bar is labelled with its share.

    rows: ``{"flavor", "capacity", "allocated", "utilised": float | None}``.
    """
    name = "capacity_now"
    utilised = _utilised_label(utilisation_source)
    headers = [
        "flavor",
        "capacity (GPUs)",
        "allocated (GPUs)",
        f"{utilised} (GPUs)",
        "allocated of capacity",
    ]
    items = sorted((_Capacity.of(r) for r in rows), key=row_key)
    if not items:
        return empty_chart(name, headers)
    flavors = [i.flavor for i in items]
    shares = [
        f"{i.allocated / i.capacity:.0%}" if i.capacity and i.allocated is not None else ""
        for i in items
    ]
    measures = ["capacity", "allocated"]
    if any(i.utilised is not None for i in items):
        measures.append("utilised")
    data = []
    for measure in measures:
        label = utilised if measure == "utilised" else measure
        trace: dict[str, Any] = {
            "type": "bar",
            "orientation": "h",
            "name": label,
            "y": flavors,
            "x": [getattr(i, measure) for i in items],
            "marker": {"color": SERIES_COLOURS[measure]},
            "hovertemplate": hover(f"%{{y}} {label}: %{{x:,.1~f}} GPUs"),
        }
        if measure == "allocated":
            trace.update(text=shares, textposition="auto", cliponaxis=False)
        data.append(trace)
    spec = layout(
        name,
        category_height(len(flavors), 22 * len(measures)),
        barmode="group",
        xaxis=axis("GPUs", rangemode="tozero"),
        yaxis=category_axis(reversed_=True),
    )
    table_rows = [
        [i.flavor, fmt(i.capacity), fmt(i.allocated), fmt(i.utilised), share or DASH]
        for i, share in zip(items, shares, strict=True)
    ]
    return chart(data, spec, Table(headers, table_rows))


def pending_by_queue(rows: Iterable[Any]) -> Chart:
    """GPUs requested by pending workloads per ClusterQueue, most first; the
    number of workloads is on each bar and in its hover.

    rows: ``{"cluster_queue", "pending_workloads", "requested_gpus"}``.
    """
    name = "pending_by_queue"
    headers = ["ClusterQueue", "pending workloads", "requested GPUs"]
    items: list[tuple[str, int | float, int | float]] = sorted(
        (
            (
                text(field(r, "cluster_queue")),
                num(field(r, "pending_workloads")) or 0,
                num(field(r, "requested_gpus")) or 0,
            )
            for r in rows
        ),
        key=lambda i: (-i[2], -i[1], i[0]),
    )
    if not items:
        return empty_chart(name, headers)
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": "requested GPUs",
            "y": [q for q, _, _ in items],
            "x": [g for _, _, g in items],
            "customdata": [[w] for _, w, _ in items],
            "text": [f"{fmt(w)} workload{'' if w == 1 else 's'}" for _, w, _ in items],
            # Inside the longest bars, outside the short ones: never past the plot edge.
            "textposition": "auto",
            "cliponaxis": False,
            "marker": {"color": [colour_for(q) for q, _, _ in items]},
            "hovertemplate": hover(
                "%{y}", "%{x:,} GPUs requested", "%{customdata[0]:,} pending workloads"
            ),
        }
    ]
    spec = layout(
        name,
        category_height(len(items)),
        showlegend=False,
        xaxis=axis("GPUs requested by pending workloads", rangemode="tozero"),
        yaxis=category_axis(reversed_=True),
    )
    table_rows = [[q, fmt(w), fmt(g)] for q, w, g in items]
    return chart(data, spec, Table(headers, table_rows))


def preemptions_by_reason(rows: Iterable[Any]) -> Chart:
    """Preemptions per reason (left) and the GPU-hours of work they lost (right),
    most frequent first.

    rows: ``{"reason", "count", "gpu_hours_lost"}``.
    """
    name = "preemptions_by_reason"
    headers = ["reason", "preemptions", "GPU-hours lost"]
    items: list[tuple[str, int | float, Num]] = sorted(
        (
            (
                text(field(r, "reason")) or "(no reason)",
                num(field(r, "count")) or 0,
                num(field(r, "gpu_hours_lost")),
            )
            for r in rows
        ),
        key=lambda i: (-i[1], -(i[2] or 0), i[0]),
    )
    if not items:
        return empty_chart(name, headers)
    reasons = [i[0] for i in items]
    colours = [colour_for(r) for r in reasons]
    data: list[dict[str, Any]] = [
        {
            "type": "bar",
            "orientation": "h",
            "name": "preemptions",
            "y": reasons,
            "x": [i[1] for i in items],
            "xaxis": "x",
            "marker": {"color": colours},
            "hovertemplate": hover("%{y}", "%{x:,} preemptions"),
        },
        {
            "type": "bar",
            "orientation": "h",
            "name": "GPU-hours lost",
            "y": reasons,
            "x": [i[2] for i in items],
            "xaxis": "x2",
            "marker": {"color": colours, "opacity": 0.7},
            "hovertemplate": hover("%{y}", "%{x:,.1f} GPU-hours lost"),
        },
    ]
    spec = layout(
        name,
        category_height(len(items)),
        showlegend=False,
        xaxis=axis("preemptions", domain=[0, 0.47], rangemode="tozero"),
        xaxis2=axis("GPU-hours lost", domain=[0.53, 1], rangemode="tozero", anchor="y"),
        yaxis=category_axis(reversed_=True),
    )
    table_rows = [[r, fmt(c), fmt(h)] for r, c, h in items]
    return chart(data, spec, Table(headers, table_rows))


def borrowing_heatmap(
    lenders: Sequence[str], borrowers: Sequence[str], gpu_hours: Sequence[Sequence[float | None]]
) -> Chart:
    """GPU-hours each borrower (row) took from each lender (column), values on
    the cells; the table lists the non-zero pairs, largest first.

    ``gpu_hours[i][j]`` is what ``borrowers[i]`` borrowed from ``lenders[j]``.
    """
    name = "borrowing_heatmap"
    headers = ["borrower", "lender", "GPU-hours"]
    if len(gpu_hours) != len(borrowers) or any(len(r) != len(lenders) for r in gpu_hours):
        raise ValueError(
            f"gpu_hours must have one row per borrower ({len(borrowers)}) and one "
            f"column per lender ({len(lenders)})"
        )
    for label, names in (("lenders", lenders), ("borrowers", borrowers)):
        if len(set(names)) != len(names):
            raise ValueError(f"{label} must not repeat a name")
    if not lenders or not borrowers:
        return empty_chart(name, headers)
    cols = sorted(range(len(lenders)), key=lambda j: lenders[j])
    rows_ = sorted(range(len(borrowers)), key=lambda i: borrowers[i])
    z = [[num(gpu_hours[i][j]) for j in cols] for i in rows_]
    xs = [lenders[j] for j in cols]
    ys = [borrowers[i] for i in rows_]
    data = [
        {
            "type": "heatmap",
            "x": xs,
            "y": ys,
            "z": z,
            "text": [[format_gpu_hours(v) if v else "" for v in row] for row in z],
            "texttemplate": "%{text}",
            "zmin": 0,
            "colorscale": [[0, "#f4f7fb"], [1, "#2f6fb0"]],
            "colorbar": {"title": {"text": "GPU-hours"}, "thickness": 12},
            "xgap": 2,
            "ygap": 2,
            "customdata": [[format_gpu_hours(v) for v in row] for row in z],
            "hovertemplate": hover("%{y} borrowed from %{x}", "%{customdata} GPU-hours"),
        }
    ]
    spec = layout(
        name,
        category_height(len(ys), 36),
        xaxis=category_axis("lender", side="top", showgrid=False),
        yaxis=category_axis("borrower", reversed_=True, showgrid=False),
    )
    spec["margin"] = {**spec["margin"], "t": 48}
    pairs = sorted(
        (
            (-v, b, lender)
            for b, row in zip(ys, z, strict=True)
            for lender, v in zip(xs, row, strict=True)
            if v
        ),
        key=row_key,
    )
    return chart(
        data, spec, Table(headers, [[b, lender, format_gpu_hours(-v)] for v, b, lender in pairs])
    )


def fair_share_over_time(rows: Iterable[Any]) -> Chart:
    """Each ClusterQueue's weighted dominant resource share over time, a line per queue.

    rows: ``{"at": datetime, "cluster_queue", "share": float}``.
    """
    name = "fair_share_over_time"
    headers = ["time (UTC)", "ClusterQueue", "weighted share"]
    points: list[tuple[datetime, str, Num]] = sorted(
        (
            (at, text(field(r, "cluster_queue")), num(field(r, "share")))
            for r in rows
            if (at := moment(field(r, "at"))) is not None
        ),
        key=row_key,
    )
    if not points:
        return empty_chart(name, headers)
    hours = sorted({at for at, _, _ in points})
    if len(hours) < 2:
        return empty_chart(
            name,
            headers,
            message=(
                f"One hourly sample so far ({when(hours[0])} UTC); the shares are drawn "
                "once a second hour has been recorded."
            ),
        )
    by_queue: dict[str, list[tuple[datetime, str, Num]]] = defaultdict(list)
    for point in points:
        by_queue[point[1]].append(point)
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": queue,
            "x": [iso(p[0]) for p in series],
            "y": [p[2] for p in series],
            "line": {"color": colour_for(queue), "width": 2},
            "hovertemplate": "%{fullData.name}: %{y:.3f}<extra></extra>",
        }
        for queue, series in sorted(by_queue.items())
    ]
    spec = layout(
        name,
        xaxis=date_axis(hoverformat="%Y-%m-%d %H:%M UTC"),
        yaxis=axis("weighted dominant resource share", rangemode="tozero"),
        hovermode="x unified",
    )
    table_rows = [[when(at), q, DASH if s is None else f"{s:.3f}"] for at, q, s in points]
    return chart(data, spec, Table(headers, table_rows))
