"""One job's life as a Gantt-like strip: phases as bars on a date axis,
events as markers on top of them."""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from frontend.charts._core import (
    DASH,
    Chart,
    Table,
    category_axis,
    chart,
    date_axis,
    empty_chart,
    field,
    format_duration,
    hover,
    iso,
    layout,
    moment,
    text,
    time_range,
    utc,
    when,
)

# Lifecycle order, which also orders events that share a timestamp (Kueue often
# reserves quota and admits within one second).
EVENT_ORDER = (
    "submitted",
    "created-on-cluster",
    "created",
    "quota-reserved",
    "check-state",
    "admitted",
    "preempted",
    "evicted",
    "requeued",
    "deactivated",
    "finished",
    "failed",
    "cancelled",
    "deleted",
)
# The phase an event starts; events not here (check-state, unknown ones) are
# instants only, and the terminal ones end the current phase for good.
STARTS = {
    "submitted": "submitting",
    "created-on-cluster": "waiting",
    "created": "waiting",
    "quota-reserved": "reserved",
    "admitted": "running",
    "preempted": "stopping",
    "evicted": "stopping",
    "requeued": "waiting",
    "deactivated": "inactive",
}
TERMINAL = frozenset({"finished", "failed", "cancelled", "deleted"})
PHASE_COLOURS = {
    "submitting": "#c9d3de",
    "waiting": "#e8b04a",
    "reserved": "#8fb8de",
    "running": "#3a9a5b",
    "stopping": "#c4463a",
    "inactive": "#9aa5b1",
}
# Marker groups (legend entries) for the instants: which events, how drawn.
MARKERS = (
    (
        "steps",
        ("submitted", "created-on-cluster", "created", "quota-reserved", "check-state", "admitted"),
        "line-ns-open",
        "#1d2430",
    ),
    ("evicted or preempted", ("preempted", "evicted", "deactivated"), "x", "#c4463a"),
    ("requeued", ("requeued",), "circle-open", "#e08a1e"),
    ("finished", ("finished",), "star", "#3a9a5b"),
    ("failed, cancelled or deleted", ("failed", "cancelled", "deleted"), "square", "#8c2f26"),
)
ROW = "job"


@dataclass(frozen=True)
class Phase:
    kind: str
    start: datetime
    end: datetime
    reason: str
    ongoing: bool


def _rank(kind: str) -> int:
    return EVENT_ORDER.index(kind) if kind in EVENT_ORDER else len(EVENT_ORDER)


def phases(events: list[tuple[datetime, str, str]], now: datetime) -> list[Phase]:
    """The phases the sorted ``events`` (at, type, reason) imply, the last one
    running until ``now`` unless a terminal event closed it. Zero-length phases
    (quota reserved and admitted in the same second) are left out."""
    found: list[Phase] = []
    current: tuple[str, datetime, str] | None = None
    for at, kind, reason in events:
        nxt = STARTS.get(kind)
        if nxt is None and kind not in TERMINAL:
            continue
        if current is not None and current[0] == nxt:
            continue  # created-on-cluster then created: one wait, not two
        if current is not None and at > current[1]:
            found.append(Phase(current[0], current[1], at, current[2], False))
        current = None if nxt is None else (nxt, at, reason)
    if current is not None:
        end = max(now, current[1])
        if end > current[1]:
            found.append(Phase(current[0], current[1], end, current[2], True))
    return found


def _marker_group(kind: str) -> str:
    """The marker group of an event type; unknown types draw as plain steps."""
    return next((label for label, kinds, _, _ in MARKERS if kind in kinds), "steps")


def _when(value: datetime) -> str:
    return when(value, seconds=True)


def _escape(value: str) -> str:
    # Hover text is plotly's pseudo-HTML; a reason is shown, never interpreted.
    return html.escape(value, quote=False)


def _phase_bars(found: list[Phase]) -> list[dict[str, Any]]:
    """One bar trace per kind of phase, in PHASE_COLOURS order."""
    data: list[dict[str, Any]] = []
    for kind, colour in PHASE_COLOURS.items():
        mine = [p for p in found if p.kind == kind]
        if not mine:
            continue
        data.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": kind,
                "y": [ROW] * len(mine),
                "base": [iso(p.start) for p in mine],
                "x": [(p.end - p.start) // timedelta(milliseconds=1) for p in mine],
                "width": 0.5,
                "customdata": [
                    [
                        _when(p.start),
                        "now" if p.ongoing else _when(p.end),
                        format_duration((p.end - p.start).total_seconds()),
                        f"<br>{_escape(p.reason)}" if p.reason else "",
                    ]
                    for p in mine
                ],
                "marker": {"color": colour},
                "hovertemplate": hover(
                    f"{kind}: %{{customdata[2]}}",
                    "%{customdata[0]} → %{customdata[1]} UTC%{customdata[3]}",
                ),
            }
        )
    return data


def _event_markers(items: list[tuple[datetime, str, str]]) -> list[dict[str, Any]]:
    """One marker trace per group of MARKERS that has events."""
    data: list[dict[str, Any]] = []
    for label, _kinds, symbol, colour in MARKERS:
        mine_events = [i for i in items if _marker_group(i[1]) == label]
        if not mine_events:
            continue
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": label,
                "y": [ROW] * len(mine_events),
                "x": [iso(at) for at, _, _ in mine_events],
                "customdata": [
                    [k, _when(at), f"<br>{_escape(r)}" if r else ""] for at, k, r in mine_events
                ],
                "marker": {
                    "symbol": symbol,
                    "color": colour,
                    "size": 11,
                    "line": {"color": colour, "width": 2},
                },
                "hovertemplate": hover("%{customdata[0]}", "%{customdata[1]} UTC%{customdata[2]}"),
            }
        )
    return data


def _table_rows(items: list[tuple[datetime, str, str]], found: list[Phase]) -> list[list[str]]:
    """Events and phases in time order, each event before a phase it starts."""
    rows: list[tuple[tuple[datetime, int], list[str]]] = [
        ((at, 0), [_when(at), DASH, kind, DASH, reason]) for at, kind, reason in items
    ]
    rows += [
        (
            (p.start, 1),
            [
                _when(p.start),
                "now" if p.ongoing else _when(p.end),
                p.kind,
                format_duration((p.end - p.start).total_seconds()),
                p.reason,
            ],
        )
        for p in found
    ]
    # Stable sort: events keep their lifecycle order within a timestamp.
    rows.sort(key=lambda r: r[0])
    return [r for _, r in rows]


def job_timeline(events: Iterable[Any], now: datetime) -> Chart:
    """A job's phases (submitting, waiting, reserved, running, stopping,
    inactive) as bars from start to end on a date axis, and its events as
    markers with their reason in the hover; a phase still open runs to ``now``.

    events: ``{"type", "at": datetime, "reason"}`` — Berth's steps (submitted,
    created-on-cluster, cancelled) and the workload's events, in any order.
    """
    name = "job_timeline"
    headers = ["from (UTC)", "to (UTC)", "phase or event", "duration", "reason"]
    # To the second, as the cluster records its times: Berth's own steps carry
    # microseconds, so a workload created in the same second would otherwise
    # seem to come before the job was submitted. Within a second, lifecycle order.
    items = sorted(
        (
            (at.replace(microsecond=0), text(field(e, "type")), text(field(e, "reason")))
            for e in events
            if (at := moment(field(e, "at"))) is not None
        ),
        key=lambda i: (i[0], _rank(i[1]), i[1], i[2]),
    )
    if not items:
        return empty_chart(name, headers)
    now = utc(now).replace(microsecond=0)
    found = phases(items, now)
    span = time_range([items[0][0], max(now, items[-1][0])], timedelta(minutes=1))
    spec = layout(
        name,
        280,
        barmode="overlay",
        xaxis=date_axis(hoverformat="%Y-%m-%d %H:%M:%S UTC", range=span),
        yaxis=category_axis(showticklabels=False, showgrid=False),
    )
    data = _phase_bars(found) + _event_markers(items)
    return chart(data, spec, Table(headers, _table_rows(items, found)))
