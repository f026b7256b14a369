"""A capacity plan's curve: each queue class's wait (at its target's
percentile) against a flavor's GPUs, the median of the seeds with their
spread, the targets as dashed limits and the answer marked."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from frontend.charts._core import (
    Chart,
    Table,
    axis,
    chart,
    colour_for,
    empty_chart,
    format_duration,
    hover,
    layout,
    scaled,
    time_scale,
)


def _cell(figures: Mapping[str, Any] | None) -> str:
    """``≥ 1 h 4 min`` or ``12 min (8 min – 20 min)``: the median, and the
    seeds' range when they differ."""
    if not figures or figures.get("median") is None:
        return "—"
    text = ("≥ " if figures.get("at_least") else "") + format_duration(figures["median"])
    low, high = figures.get("low"), figures.get("high")
    if low is not None and high is not None and high - low >= 1:
        text += f" ({format_duration(low)} – {format_duration(high)})"
    return text


def capacity_curve(
    curve: Iterable[Mapping[str, Any]],
    percentiles: Mapping[str, float],
    targets: Iterable[Mapping[str, Any]] = (),
    *,
    flavor: str = "",
    answer: int | None = None,
) -> Chart:
    """curve: ``{"gpus", "groups": {group: {"median", "low", "high",
    "at_least"}}}`` per capacity replayed; percentiles: group -> the
    percentile shown; targets: ``{"group", "max_wait"}``; answer: the GPUs
    every target needs (a dotted line), if found."""
    name = f"capacity-{flavor}"
    points = sorted(curve, key=lambda p: p["gpus"])
    groups = sorted(percentiles)
    headers = [f"{flavor} GPUs"] + [f"{g} p{percentiles[g]:g}" for g in groups]
    if not points or not groups:
        return empty_chart(name, headers)
    targets = list(targets)
    waits = [
        value
        for p in points
        for g in groups
        for value in ((p["groups"].get(g) or {}).get("high"),)
        if value is not None
    ] + [float(t["max_wait"]) for t in targets]
    scale = time_scale(waits)
    gpus = [p["gpus"] for p in points]
    data: list[dict[str, Any]] = []
    for group in groups:
        figures = [p["groups"].get(group) or {} for p in points]
        median = [scaled(f.get("median"), scale.divisor) for f in figures]
        low = [scaled(f.get("low"), scale.divisor) for f in figures]
        high = [scaled(f.get("high"), scale.divisor) for f in figures]
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": f"{group} p{percentiles[group]:g}",
                "x": gpus,
                "y": median,
                # A lower bound (the replay stopped, or work still waited) points up.
                "marker": {
                    "color": colour_for(group),
                    "symbol": ["triangle-up" if f.get("at_least") else "circle" for f in figures],
                    "size": 8,
                },
                "line": {"color": colour_for(group)},
                "error_y": {
                    "type": "data",
                    "symmetric": False,
                    "array": [
                        None if h is None or m is None else h - m
                        for h, m in zip(high, median, strict=True)
                    ],
                    "arrayminus": [
                        None if lo is None or m is None else m - lo
                        for lo, m in zip(low, median, strict=True)
                    ],
                    "color": colour_for(group),
                },
                "customdata": [_cell(f) for f in figures],
                "hovertemplate": hover(f"{group}: %{{x}} GPUs", "%{customdata}"),
            }
        )
    shapes: list[dict[str, Any]] = [
        {
            "type": "line",
            "xref": "paper",
            "x0": 0,
            "x1": 1,
            "y0": float(t["max_wait"]) / scale.divisor,
            "y1": float(t["max_wait"]) / scale.divisor,
            "line": {"dash": "dash", "width": 1, "color": colour_for(str(t["group"]))},
        }
        for t in targets
    ]
    if answer is not None:
        shapes.append(
            {
                "type": "line",
                "yref": "paper",
                "x0": answer,
                "x1": answer,
                "y0": 0,
                "y1": 1,
                "line": {"dash": "dot", "width": 1, "color": "#1d2430"},
            }
        )
    spec = layout(
        name,
        xaxis=axis(f"{flavor} GPUs", rangemode="tozero"),
        yaxis=axis(f"wait ({scale.title})", rangemode="tozero"),
        shapes=shapes,
    )
    rows = [
        [f"{p['gpus']:,}"] + [_cell(p["groups"].get(group)) for group in groups] for p in points
    ]
    return chart(data, spec, Table(headers, rows))
