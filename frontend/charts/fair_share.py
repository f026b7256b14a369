"""A team's fair share for people: each window's figures as text (GPU-hours
and waits as everywhere in Berth, the share as a whole percentage), for the
team page and the Overview. Rows in, rows of text out; no raw floats reach a
page. Pure Python: no Django."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from frontend.charts._core import format_duration, format_gpu_hours

WINDOW_LABELS: dict[str, str] = {"1h": "last hour", "24h": "last 24 hours", "7d": "last 7 days"}
DASH = "—"


def percent(ratio: float | None) -> str:
    """0.123 → "12 %"; a share under 1 % but above none reads "< 1 %"."""
    if ratio is None:
        return DASH
    shown = round(float(ratio) * 100)
    if shown == 0 and ratio > 0:
        return "< 1 %"
    return f"{shown:,} %"


@dataclass(frozen=True)
class WindowRow:
    window: str  # 1h, 24h, 7d
    label: str  # last hour, ...
    waited: str
    received: str
    deserved: str
    share: str
    starved: bool  # below the threshold in this window (whether or not it waits now)


def window_rows(figures: Mapping[str, Any], threshold: float) -> list[WindowRow]:
    """One row per window, in order, from ``TeamFairness.figures``."""
    rows = []
    for window, label in WINDOW_LABELS.items():
        entry = figures.get(window) or {}
        ratio = entry.get("ratio")
        waited = float(entry.get("waiting") or 0)
        rows.append(
            WindowRow(
                window=window,
                label=label,
                waited=format_duration(waited) if waited else "never",
                received=format_gpu_hours(entry.get("received")) if waited else DASH,
                deserved=format_gpu_hours(entry.get("deserved")) if waited else DASH,
                share=percent(ratio),
                starved=ratio is not None and float(ratio) < threshold,
            )
        )
    return rows
