"""Dashboard charts: selector rows in, plotly figures out.

Every builder takes plain rows (dicts or objects with the named fields; UTC
datetimes, canonical integers, GPU counts) and returns a :class:`Chart`: the
figure as plain dicts for ``Plotly.react(el, fig.data, fig.layout, ...)``, a
:class:`Table` with the same numbers as text (the fallback every chart has),
and ``empty`` — with no rows the figure says "No data yet" and
``layout.meta.empty`` is true, so a page can show its own empty state.

Output is deterministic: the same rows, in any order, give the same JSON.
Names keep their colour everywhere (:func:`colour_for`).

Pure Python: no Django, no kubernetes client, and no plotly at runtime.
"""

from __future__ import annotations

from frontend.charts._core import (
    EMPTY_TEXT,
    PALETTE,
    SERIES_COLOURS,
    Chart,
    ResourceUnit,
    Table,
    colour_for,
    format_duration,
    resource_unit,
)
from frontend.charts.cluster import (
    borrowing_heatmap,
    capacity_now,
    capacity_over_time,
    fair_share_over_time,
    pending_by_queue,
    preemptions_by_reason,
)
from frontend.charts.queue_detail import queue_quota, usage_over_time
from frontend.charts.timeline import job_timeline
from frontend.charts.waits import wait_distribution, wait_trend, worst_waits
from frontend.charts.whatif import comparison

__all__ = [
    "EMPTY_TEXT",
    "PALETTE",
    "SERIES_COLOURS",
    "Chart",
    "ResourceUnit",
    "Table",
    "borrowing_heatmap",
    "capacity_now",
    "capacity_over_time",
    "colour_for",
    "comparison",
    "fair_share_over_time",
    "format_duration",
    "job_timeline",
    "pending_by_queue",
    "preemptions_by_reason",
    "queue_quota",
    "resource_unit",
    "usage_over_time",
    "wait_distribution",
    "wait_trend",
    "worst_waits",
]
