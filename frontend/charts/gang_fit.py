"""The gang-fit chart: one flavor's free GPUs over time, split into those on
whole free nodes (a gang of whole nodes can use them) and those stranded on
nodes partly in use, with the share stranded (fragmentation) on a second axis;
and the formats the page writes the map's numbers in (no raw float).

rows: ``{"at": datetime, "free_gpus": int, "whole_free_nodes": int,
"stranded_gpus": int, "gpus": int}`` (``cluster.models.GangFitSnapshot``).

Pure Python: no Django, no kubernetes client, no plotly at runtime.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from frontend.charts._core import (
    Chart,
    Table,
    axis,
    chart,
    date_axis,
    empty_chart,
    field,
    fmt,
    iso,
    layout,
    moment,
    num,
    time_range,
    when,
)

WHOLE_COLOUR, STRANDED_COLOUR, SHARE_COLOUR = "#3a9a5b", "#e08a1e", "#c4463a"


def format_share(value: Any) -> str:
    """A share (0 to 1) as a whole percentage: ``60 %``; a dash when unknown."""
    amount = num(value)
    if amount is None:
        return "—"
    return f"{round(amount * 100):d} %"


def gang_text(pods: Any, gpus_per_node: Any) -> str:
    """``3 × 8``: nodes (pods) times GPUs per node; a dash for none."""
    count, size = num(pods), num(gpus_per_node)
    if not count or size is None:
        return "—"
    return f"{int(count):,} × {int(size):,}"


def fragmentation_over_time(rows: Iterable[Any], flavor: str) -> Chart:
    name = f"gang_fit_{flavor}"
    headers = [
        "time (UTC)",
        "free GPUs",
        "on whole free nodes",
        "stranded on nodes in use",
        "stranded share",
    ]
    points = []
    for row in rows:
        at = moment(field(row, "at"))
        free, stranded = num(field(row, "free_gpus")), num(field(row, "stranded_gpus"))
        if at is None or free is None or stranded is None:
            continue
        points.append((at, int(free), int(stranded)))
    points.sort()
    if not points:
        return empty_chart(name, headers, message="No gang-fit snapshots of this flavor yet.")
    xs = [iso(at) for at, _, _ in points]
    shares = [stranded / free if free else 0.0 for _, free, stranded in points]
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "lines",
            "stackgroup": "free",
            "name": "free on whole nodes",
            "x": xs,
            "y": [free - stranded for _, free, stranded in points],
            "line": {"color": WHOLE_COLOUR, "shape": "hv", "width": 1},
            "hovertemplate": "%{fullData.name}: %{y:,d} GPUs<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "stackgroup": "free",
            "name": "free but stranded",
            "x": xs,
            "y": [stranded for _, _, stranded in points],
            "line": {"color": STRANDED_COLOUR, "shape": "hv", "width": 1},
            "hovertemplate": "%{fullData.name}: %{y:,d} GPUs<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": "stranded share",
            "x": xs,
            "y": [round(share, 4) for share in shares],
            "yaxis": "y2",
            "line": {"color": SHARE_COLOUR, "dash": "dot", "width": 2, "shape": "hv"},
            "hovertemplate": "%{fullData.name}: %{y:.0%}<extra></extra>",
        },
    ]
    span = time_range((at for at, _, _ in points), timedelta(minutes=10))
    spec = layout(
        name,
        xaxis=date_axis(hoverformat="%Y-%m-%d %H:%M UTC", range=span),
        yaxis=axis("free GPUs", rangemode="tozero", tickformat=",d"),
        yaxis2=axis(
            "stranded share",
            overlaying="y",
            side="right",
            range=[0, 1],
            dtick=0.25,
            tickformat=".0%",
            showgrid=False,
        ),
        hovermode="x unified",
    )
    table = Table(
        headers,
        [
            [when(at), fmt(free), fmt(free - stranded), fmt(stranded), format_share(share)]
            for (at, free, stranded), share in zip(points, shares, strict=True)
        ],
    )
    return chart(data, spec, table)
