"""What every chart shares: the Chart and Table types, the palette, units,
number and time formatting, and the layout defaults.

Pure Python: no Django, no kubernetes client, no plotly at runtime.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from queues import display
from queues.quantity import Unit, format_canonical, unit_for

# Ten hues that stay apart for the common colour-vision deficiencies and on
# white. A name (flavor, ClusterQueue, reason) always maps to the same entry,
# so "h100-spot" has one colour on every chart of every page.
PALETTE: tuple[str, ...] = (
    "#2f6fb0",  # blue
    "#e08a1e",  # orange
    "#3a9a5b",  # green
    "#c4463a",  # red
    "#7b5fb0",  # purple
    "#8c6a4f",  # brown
    "#d16fa8",  # pink
    "#5f6b78",  # slate
    "#a8a626",  # olive
    "#2aa3b5",  # teal
)

# Where traces are measures rather than names (capacity vs allocated, today vs
# proposal) they get these fixed colours instead.
SERIES_COLOURS: dict[str, str] = {
    "capacity": "#9aa5b1",
    "allocated": "#2f6fb0",
    "utilised": "#3a9a5b",
    "nominal": "#5f6b78",
    "usage": "#2f6fb0",
    "borrowed": "#e08a1e",
    "lent": "#7b5fb0",
    "p50": "#1d2430",
    "p95": "#c4463a",
    "admissions": "#c9d3de",
    "today": "#9aa5b1",
    "proposal": "#2f6fb0",
    "workloads": "#2f6fb0",
}

Num = int | float | None

EMPTY_TEXT = "No data yet"
DASH = "—"
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
GRID = "#e3e7ec"


def colour_for(name: str) -> str:
    """The palette colour of ``name``: a stable hash (CRC-32, not ``hash()``,
    which changes per process), so it is the same across charts and restarts."""
    return PALETTE[zlib.crc32(name.encode("utf-8", "surrogatepass")) % len(PALETTE)]


@dataclass(frozen=True)
class Table:
    """The text fallback of a chart: headers and rows of display strings."""

    headers: list[str]
    rows: list[list[str]]


def _json_default(value: object) -> str:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


@dataclass(frozen=True)
class Chart:
    """A plotly figure (``{"data": [...], "layout": {...}}``, plain dicts for
    ``Plotly.react``), its table fallback, and whether there was anything to draw."""

    figure: dict[str, Any]
    table: Table
    empty: bool
    # Why nothing is drawn, when it is not simply "no data" (too little of it).
    message: str = ""

    def figure_json(self) -> str:
        """Compact, canonical JSON of the figure, safe inside a ``<script>`` element:
        ``<``, ``>`` and ``&`` are written as ``\\u00XX`` escapes (JSON syntax
        never uses them outside strings, so the value is unchanged)."""
        text = json.dumps(
            self.figure,
            separators=(",", ":"),
            sort_keys=True,
            ensure_ascii=False,
            allow_nan=False,
            default=_json_default,
        )
        return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# --- values -------------------------------------------------------------------


def field(row: Any, key: str) -> Any:
    """``row[key]`` for a mapping, ``row.key`` for a dataclass or object; None if absent."""
    if isinstance(row, dict):
        return row.get(key)
    getter = getattr(row, "get", None)
    if callable(getter):
        return getter(key)
    return getattr(row, key, None)


def num(value: Any) -> int | float | None:
    """A finite int or float, or None (for None, NaN, infinities and non-numbers)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float | Decimal):
        as_float = float(value)
        return as_float if math.isfinite(as_float) else None
    return None


def text(value: Any) -> str:
    return "" if value is None else str(value)


def moment(value: Any) -> datetime | None:
    """``value`` as a UTC datetime, or None when it is not a datetime."""
    return utc(value) if isinstance(value, datetime) else None


def utc(value: datetime) -> datetime:
    """``value`` in UTC; a naive datetime is taken to be UTC already (Berth stores UTC)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def iso(value: datetime) -> str:
    """ISO 8601 in UTC with ``Z``, to the second (or millisecond when it has one)."""
    moment = utc(value)
    spec = "seconds" if moment.microsecond == 0 else "milliseconds"
    return moment.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


def when(value: datetime, seconds: bool = False) -> str:
    """A table cell for a time: ``2026-11-30 14:05``, with seconds when asked or non-zero."""
    moment = utc(value)
    return moment.strftime("%Y-%m-%d %H:%M:%S" if seconds or moment.second else "%Y-%m-%d %H:%M")


def none_last(value: Any) -> tuple[int, Any]:
    """A sort key that puts None after every value (of one type) instead of failing."""
    return (1, 0) if value is None else (0, value)


def row_key(values: Iterable[Any]) -> tuple[tuple[int, Any], ...]:
    return tuple(none_last(v) for v in values)


def fmt(value: int | float | None, digits: int = 1) -> str:
    """A table cell for a number: whole numbers plainly, others to ``digits`` places."""
    if value is None:
        return DASH
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.{digits}f}"


def _amount(value: float, unit: str) -> str:
    rounded = round(value, 1)
    shown = str(int(rounded)) if rounded.is_integer() else f"{rounded}"
    return f"{shown} {unit}"


def format_duration(seconds: float | None) -> str:
    """A wait for people, as everywhere in Berth (``queues.display.duration``)."""
    return display.duration(seconds)


def bound_label(seconds: float) -> str:
    """A histogram bound: ``30 s``, ``1 min``, ``1.5 h``, ``7 d``."""
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return _amount(seconds / size, unit)
    return _amount(max(0.0, seconds), "s")


@dataclass(frozen=True)
class TimeScale:
    """Seconds shown as minutes or hours, whichever keeps the axis readable."""

    divisor: int
    unit: str  # short, for hover: "min" / "h"
    title: str  # for the axis: "minutes" / "hours"


def time_scale(seconds: Iterable[float | None]) -> TimeScale:
    """Seconds while the longest value is under 2 min (10 s is not "0.17 min"),
    minutes under 3 h, else hours."""
    longest = max((s for s in seconds if s is not None), default=0.0)
    if longest < 120:
        return TimeScale(1, "s", "seconds")
    if longest < 3 * 3600:
        return TimeScale(60, "min", "minutes")
    return TimeScale(3600, "h", "hours")


def scaled(value: float | None, divisor: float) -> float | None:
    return None if value is None else round(value / divisor, 4)


# --- resources ------------------------------------------------------------------


@dataclass(frozen=True)
class ResourceUnit:
    """How a resource's canonical integers are drawn: divide by ``scale`` and
    label with ``suffix``; ``title`` is the axis title in Kubernetes words."""

    resource: str
    title: str
    suffix: str
    scale: int
    hover: str  # d3 format for hovertemplates

    def value(self, amount: int | float | None) -> float | int | None:
        if amount is None:
            return None
        return amount if self.scale == 1 else round(amount / self.scale, 4)

    def notation(self, amount: int | float | None) -> str:
        """Kubernetes notation for a canonical amount: ``500m``, ``64Gi``, ``8``."""
        if amount is None:
            return DASH
        return format_canonical(self.resource, round(amount))


def is_gpu(resource: str) -> bool:
    return resource == "gpu" or resource.endswith("/gpu")


def resource_unit(resource: str) -> ResourceUnit:
    """The unit hint for ``resource``: CPU in cores, memory-like in GiB, GPUs as counts."""
    if is_gpu(resource):
        return ResourceUnit(resource, "GPUs", "GPUs", 1, ",.1~f")
    unit = unit_for(resource)
    if unit is Unit.MILLI:
        return ResourceUnit(resource, f"{resource.upper()} (cores)", "cores", 1000, ",.3~f")
    if unit is Unit.BYTES:
        return ResourceUnit(resource, f"{resource} (GiB)", "GiB", 2**30, ",.2~f")
    return ResourceUnit(resource, resource, resource, 1, ",.1~f")


def resource_order(resource: str) -> tuple[int, str]:
    """GPUs first (it is a GPU dashboard), then cpu, memory, the rest by name."""
    if is_gpu(resource):
        return (0, resource)
    return ({"cpu": 1, "memory": 2}.get(resource, 3), resource)


# --- figures --------------------------------------------------------------------


def axis(title: str = "", **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"automargin": True, "gridcolor": GRID, "zeroline": False}
    if title:
        spec["title"] = {"text": title}
    spec.update(extra)
    return spec


def category_axis(title: str = "", reversed_: bool = False, **extra: Any) -> dict[str, Any]:
    # An explicit category type: a queue named "2024" must not become a year.
    spec = axis(title, type="category", **extra)
    if reversed_:
        spec["autorange"] = "reversed"  # first category at the top
    return spec


def date_axis(
    title: str = "time (UTC)", range: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    """A time axis; ``range`` (from ``time_range``) when its points span too little."""
    spec = axis(title, type="date", **extra)
    if range is not None:
        spec["range"] = range
    return spec


def time_range(moments: Iterable[datetime], minimum: timedelta) -> list[str] | None:
    """An x range at least ``minimum`` wide, ending at the newest moment, for a
    time axis whose points span less: left to itself plotly stretches a few
    seconds across the chart and ticks every 20 ms. None when they span enough."""
    points = sorted(utc(m) for m in moments)
    if not points:
        return None
    if points[-1] - points[0] >= minimum:
        return None
    end = max(points[-1], points[0] + minimum / 2)
    return [iso(end - minimum), iso(end)]


def layout(name: str, height: int = 320, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "height": height,
        "margin": {"l": 48, "r": 16, "t": 28, "b": 40, "pad": 2},
        "font": {"family": FONT, "size": 12, "color": "#1d2430"},
        "colorway": list(PALETTE),
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
        "hovermode": "closest",
        # Plotly.react keeps the reader's zoom and hidden traces across refreshes.
        "uirevision": name,
        "meta": {"chart": name, "empty": False},
    }
    spec.update(extra)
    return spec


def category_height(categories: int, per_category: int = 28) -> int:
    """Tall enough for every bar row of a horizontal chart: 280 px up to 640 px."""
    return max(280, min(640, 90 + per_category * categories))


def chart(figure_data: list[dict[str, Any]], spec: dict[str, Any], table: Table) -> Chart:
    return Chart({"data": figure_data, "layout": spec}, table, False)


def empty_chart(name: str, headers: list[str], height: int = 280, message: str = "") -> Chart:
    """No rows, or too few to draw (``message`` says so): an annotated blank
    figure whose ``layout.meta.empty`` tells the template to show its
    empty-state text instead."""
    spec = layout(name, height)
    spec["meta"] = {"chart": name, "empty": True}
    spec["xaxis"] = {"visible": False}
    spec["yaxis"] = {"visible": False}
    spec["annotations"] = [
        {
            "text": EMPTY_TEXT,
            "xref": "paper",
            "yref": "paper",
            "x": 0.5,
            "y": 0.5,
            "showarrow": False,
            "font": {"size": 14, "color": "#5f6b78"},
        }
    ]
    return Chart({"data": [], "layout": spec}, Table(headers, []), True, message)


def format_gpu_hours(value: float | None) -> str:
    """GPU-hours as everywhere in Berth (``queues.display.gpu_hours``)."""
    return display.gpu_hours(value)


def hover(*lines: str) -> str:
    """A hovertemplate from lines; user text only ever arrives through
    ``%{x}``/``%{y}``/``%{customdata}``, so it is never read as a template."""
    return "<br>".join(lines) + "<extra></extra>"
