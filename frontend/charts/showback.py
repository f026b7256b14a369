"""Showback charts and their numbers: a month's GPU-hours (allocated, busy,
lost to preemption) and cost per group (team, workload type, flavor), and the
formats the page writes them in: hours to one decimal, money to the cent
with its currency. No raw float reaches the page.

rows: ``{"label": "research · training", "allocated_gpu_hours": float,
"busy_gpu_hours": float | None, "lost_gpu_hours": float, "cost": str | None,
"lost_cost": str | None}`` (the API's figures, ``jobs.showback``).

Pure Python: no Django, no kubernetes client, no plotly at runtime.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any, NamedTuple

from frontend.charts._core import (
    DASH,
    SERIES_COLOURS,
    Chart,
    Table,
    axis,
    category_axis,
    category_height,
    chart,
    empty_chart,
    field,
    hover,
    layout,
    num,
    text,
)

LOST_COLOUR = "#c4463a"


def format_hours(value: Any) -> str:
    """GPU-hours to one decimal with thousands separators (``1,234.5``); a
    dash when unknown; ``< 0.1`` for a little that would read as nothing."""
    amount = num(value)
    if amount is None:
        return DASH
    if 0 < amount < 0.05:
        return "< 0.1"
    return f"{amount:,.1f}"


def _decimal(value: Any) -> Decimal | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    return amount if amount.is_finite() else None


def format_money(value: Any, currency: str) -> str:
    """Money to the cent with the currency: ``1,234.50 USD``; a dash when not priced."""
    amount = _decimal(value)
    if amount is None:
        return DASH
    cents = amount.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)
    return f"{cents:,.2f} {currency}"


def format_share(part: Any, whole: Any) -> str:
    """``part`` of ``whole`` as a whole percentage (``72 %``); a dash when unknown."""
    a, b = num(part), num(whole)
    if a is None or not b:
        return DASH
    return f"{a / b:.0%}".replace("%", " %")


class _Row(NamedTuple):
    label: str
    allocated: float
    busy: float | None
    lost: float
    cost: Decimal | None
    lost_cost: Decimal | None

    @classmethod
    def of(cls, row: Any) -> _Row:
        return cls(
            text(field(row, "label")) or DASH,
            float(num(field(row, "allocated_gpu_hours")) or 0.0),
            num(field(row, "busy_gpu_hours")),
            float(num(field(row, "lost_gpu_hours")) or 0.0),
            _decimal(field(row, "cost")),
            _decimal(field(row, "lost_cost")),
        )


def _rows(rows: Any) -> list[_Row]:
    # Most allocated first; ties by label, so the order never depends on the input's.
    return sorted((_Row.of(r) for r in rows), key=lambda r: (-r.allocated, r.label))


def usage_hours(rows: Any, *, group: str = "group") -> Chart:
    """GPU-hours per group: allocated, busy (where measured) and lost to
    preemption, as grouped horizontal bars, the largest allocation on top."""
    name = "usage_hours"
    headers = [group, "allocated GPU-hours", "busy GPU-hours", "lost GPU-hours"]
    items = _rows(rows)
    if not items:
        return empty_chart(name, headers)
    labels = [r.label for r in items]
    series: list[tuple[str, list[float | None], str]] = [
        ("allocated", [round(r.allocated, 1) for r in items], SERIES_COLOURS["allocated"]),
    ]
    if any(r.busy is not None for r in items):
        series.append(
            (
                "busy",
                [None if r.busy is None else round(r.busy, 1) for r in items],
                SERIES_COLOURS["utilised"],
            )
        )
    series.append(("lost to preemption", [round(r.lost, 1) for r in items], LOST_COLOUR))
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": label,
            "y": labels,
            "x": values,
            "marker": {"color": colour},
            "hovertemplate": hover(f"%{{y}}: %{{x:,.1f}} GPU-hours {label}"),
        }
        for label, values, colour in series
    ]
    spec = layout(
        name,
        height=category_height(len(labels) * len(series), per_category=14),
        barmode="group",
        xaxis=axis("GPU-hours", rangemode="tozero", tickformat=",.1f"),
        yaxis=category_axis(reversed_=True),
    )
    table = Table(
        headers,
        [
            [r.label, format_hours(r.allocated), format_hours(r.busy), format_hours(r.lost)]
            for r in items
        ],
    )
    return chart(data, spec, table)


def usage_cost(rows: Any, *, currency: str, group: str = "group") -> Chart:
    """Cost per group at each flavor's price in force: the cost of the
    allocated hours, and the part of it that paid for work preemption lost.
    Groups with no priced hours are left out (their cost is unknown)."""
    name = "usage_cost"
    headers = [group, f"cost ({currency})", f"of which lost ({currency})"]
    items = [r for r in _rows(rows) if r.cost is not None]
    if not items:
        return empty_chart(name, headers)
    items.sort(key=lambda r: (-(r.cost or 0), r.label))
    labels = [r.label for r in items]
    kept = [float((r.cost or 0) - (r.lost_cost or 0)) for r in items]
    lost = [float(r.lost_cost or 0) for r in items]
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": "kept work",
            "y": labels,
            "x": [round(v, 2) for v in kept],
            "marker": {"color": SERIES_COLOURS["allocated"]},
            "hovertemplate": hover(f"%{{y}}: %{{x:,.2f}} {currency} of work kept"),
        },
        {
            "type": "bar",
            "orientation": "h",
            "name": "lost to preemption",
            "y": labels,
            "x": [round(v, 2) for v in lost],
            "marker": {"color": LOST_COLOUR},
            "hovertemplate": hover(f"%{{y}}: %{{x:,.2f}} {currency} of work lost"),
        },
    ]
    spec = layout(
        name,
        height=category_height(len(labels)),
        barmode="stack",
        showlegend=True,
        # Plotly lists stacked traces last first; kept work reads first.
        legend={"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom", "traceorder": "normal"},
        xaxis=axis(f"cost ({currency})", rangemode="tozero", tickformat=",.2f"),
        yaxis=category_axis(reversed_=True),
    )
    table = Table(
        headers,
        [
            [r.label, format_money(r.cost, currency), format_money(r.lost_cost, currency)]
            for r in items
        ],
    )
    return chart(data, spec, table)
