"""One ClusterQueue's charts: its quota against usage, and usage over time."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from frontend.charts._core import (
    SERIES_COLOURS,
    Chart,
    Num,
    ResourceUnit,
    Table,
    axis,
    category_axis,
    chart,
    colour_for,
    date_axis,
    empty_chart,
    field,
    iso,
    layout,
    moment,
    num,
    resource_order,
    resource_unit,
    row_key,
    text,
    time_range,
    when,
)

QUOTA_SERIES = ("nominal", "usage", "borrowed", "lent")


class _Quota(NamedTuple):
    order: tuple[int, str]  # resource_order(resource): GPUs first
    flavor: str
    nominal: Num
    usage: Num
    borrowed: Num
    lent: Num

    @property
    def resource(self) -> str:
        return self.order[1]


class _Usage(NamedTuple):
    at: datetime
    flavor: str
    usage: Num
    borrowed: Num
    nominal: Num


def _row_domains(count: int, gap: float = 0.14) -> list[list[float]]:
    """Vertical domains for ``count`` stacked subplots, top first."""
    domains = []
    for i in range(count):
        top, bottom = 1 - i / count, 1 - (i + 1) / count
        if i > 0:
            top -= gap / 2
        if i < count - 1:
            bottom += gap / 2
        domains.append([round(bottom, 4), round(top, 4)])
    return domains


def queue_quota(rows: Iterable[Any]) -> Chart:
    """One ClusterQueue's nominal quota, usage, borrowed and lent amounts as
    grouped bars per flavor, one subplot row per resource in its own unit (GPUs,
    CPU cores, GiB); the hover gives the exact amount in Kubernetes notation.

    rows: ``{"flavor", "resource", "nominal", "usage", "borrowed", "lent"}``
    (canonical integers: milli-CPU, bytes, counts).
    """
    name = "queue_quota"
    headers = ["flavor", "resource", *QUOTA_SERIES]
    items = sorted(
        (
            _Quota(
                resource_order(text(field(r, "resource"))),
                text(field(r, "flavor")),
                *(num(field(r, k)) for k in QUOTA_SERIES),
            )
            for r in rows
        ),
        key=row_key,
    )
    if not items:
        return empty_chart(name, headers)
    flavors = sorted({i.flavor for i in items})
    by_resource: dict[str, list[_Quota]] = defaultdict(list)
    for item in items:
        by_resource[item.resource].append(item)
    shown = [s for s in QUOTA_SERIES if any(getattr(i, s) is not None for i in items)]
    domains = _row_domains(len(by_resource))
    data: list[dict[str, Any]] = []
    # 170 px per resource row (GPUs, cpu, memory: 570 px), at most 700 px in all.
    spec = layout(name, min(700, max(300, 60 + 170 * len(by_resource))), barmode="group")
    for row, (resource, series) in enumerate(by_resource.items()):
        unit = resource_unit(resource)
        suffix = "" if row == 0 else str(row + 1)
        for label in shown:
            data.append(
                {
                    "type": "bar",
                    "name": label,
                    "legendgroup": label,
                    "showlegend": row == 0,
                    "x": [i.flavor for i in series],
                    "y": [unit.value(getattr(i, label)) for i in series],
                    "customdata": [[unit.notation(getattr(i, label)), resource] for i in series],
                    "xaxis": f"x{suffix}",
                    "yaxis": f"y{suffix}",
                    "marker": {"color": SERIES_COLOURS[label]},
                    "hovertemplate": (
                        f"%{{x}} · %{{customdata[1]}}<br>{label}: %{{customdata[0]}}"
                        f" (%{{y:{unit.hover}}} {unit.suffix})<extra></extra>"
                    ),
                }
            )
        spec[f"xaxis{suffix}"] = category_axis(
            anchor=f"y{suffix}", categoryorder="array", categoryarray=flavors
        )
        if row:
            # Every row shows every flavor in one place, even where it has no quota.
            spec[f"xaxis{suffix}"]["matches"] = "x"
        spec[f"yaxis{suffix}"] = axis(
            unit.title, anchor=f"x{suffix}", domain=domains[row], rangemode="tozero"
        )
    table_rows = [
        [i.flavor, i.resource, *(resource_unit(i.resource).notation(v) for v in i[2:])]
        for i in items
    ]
    return chart(data, spec, Table(headers, table_rows))


def _group_usage(
    points: list[_Usage],
) -> tuple[dict[str, list[_Usage]], dict[datetime, list[Num]]]:
    """The points per flavor, and per time the queue's total borrowed (slot 0)
    and nominal (slot 1) over its flavors."""
    by_flavor: dict[str, list[_Usage]] = defaultdict(list)
    totals: dict[datetime, list[Num]] = {}
    for point in points:
        by_flavor[point.flavor].append(point)
        total = totals.setdefault(point.at, [None, None])
        for slot, value in ((0, point.borrowed), (1, point.nominal)):
            if value is not None:
                total[slot] = (total[slot] or 0) + value
    return by_flavor, totals


def _usage_traces(
    by_flavor: dict[str, list[_Usage]], unit: ResourceUnit, value_hover: str
) -> list[dict[str, Any]]:
    """One line per flavor, stacked: what it had in use."""
    return [
        {
            "type": "scatter",
            "mode": "lines",
            "name": flavor,
            "stackgroup": "usage",
            "x": [iso(p.at) for p in series],
            "y": [unit.value(p.usage) for p in series],
            "line": {"color": colour_for(flavor), "width": 1, "shape": "hv"},
            "hovertemplate": f"%{{fullData.name}} in use: {value_hover}<extra></extra>",
        }
        for flavor, series in sorted(by_flavor.items())
    ]


def _total_traces(
    totals: dict[datetime, list[Num]], times: list[datetime], unit: ResourceUnit, value_hover: str
) -> list[dict[str, Any]]:
    """The total nominal quota (dashed) and borrowed (dotted) lines, each where it has values."""
    traces = []
    for label, slot, dash in (("nominal quota", 1, "dash"), ("borrowed", 0, "dot")):
        values = [totals[t][slot] for t in times]
        if all(v is None for v in values):
            continue
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": label,
                "x": [iso(t) for t in times],
                "y": [unit.value(v) for v in values],
                "line": {
                    "color": SERIES_COLOURS["nominal" if slot else "borrowed"],
                    "dash": dash,
                    "width": 2,
                    "shape": "hv",
                },
                "hovertemplate": f"{label}: {value_hover}<extra></extra>",
            }
        )
    return traces


def usage_over_time(rows: Iterable[Any], *, resource: str = "nvidia.com/gpu") -> Chart:
    """One ClusterQueue's usage over time, stacked by flavor, with its total
    nominal quota (dashed) and the total borrowed above it (dotted).

    rows: ``{"at": datetime, "flavor", "usage", "borrowed", "nominal"}`` in
    ``resource``'s canonical unit (GPU counts by default).
    """
    name = "usage_over_time"
    unit = resource_unit(resource)
    what = "GPUs" if unit.suffix == "GPUs" else resource
    headers = ["time (UTC)", "flavor", f"usage ({what})", f"borrowed ({what})", f"nominal ({what})"]
    points = sorted(
        (
            _Usage(at, text(field(r, "flavor")), *(num(field(r, k)) for k in _Usage._fields[2:]))
            for r in rows
            if (at := moment(field(r, "at"))) is not None
        ),
        key=row_key,
    )
    if not points:
        return empty_chart(name, headers)
    by_flavor, totals = _group_usage(points)
    value_hover = f"%{{y:{unit.hover}}} {unit.suffix}"
    times = sorted(totals)
    data = _usage_traces(by_flavor, unit, value_hover)
    data += _total_traces(totals, times, unit, value_hover)
    span = time_range(times, timedelta(minutes=10))
    spec = layout(
        name,
        xaxis=date_axis(hoverformat="%Y-%m-%d %H:%M UTC", range=span),
        yaxis=axis(unit.title, rangemode="tozero"),
        hovermode="x unified",
    )
    spec["legend"]["traceorder"] = "normal"  # plotly reverses stacked traces by default
    table_rows = [
        [
            when(p.at),
            p.flavor,
            unit.notation(p.usage),
            unit.notation(p.borrowed),
            unit.notation(p.nominal),
        ]
        for p in points
    ]
    return chart(data, spec, Table(headers, table_rows))
