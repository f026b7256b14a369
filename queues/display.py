"""How Berth writes values for people, in one place: GPU-hours, taints and
Kueue's messages here; durations, moments and start estimates from
``berth_cli.text``, which the CLI ships too. Pages, charts and the API's text
fields all use these, so 100,000 s reads the same everywhere.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import re

from berth_cli.text import DASH, duration, relative, start_estimate, timestamp

__all__ = [
    "DASH",
    "duration",
    "gpu_hours",
    "kueue_text",
    "relative",
    "start_estimate",
    "taint",
    "timestamp",
]


def gpu_hours(value: float | None) -> str:
    """GPU-hours: two decimals under 10, one above, trailing zeros dropped, and
    ``< 0.01`` for a small amount that would otherwise read as nothing."""
    if value is None:
        return DASH
    if 0 < abs(value) < 0.005:
        return "< 0.01"
    shown = f"{value:,.2f}" if abs(value) < 10 else f"{value:,.1f}"
    return shown.rstrip("0").rstrip(".") if "." in shown else shown


def taint(key: str, value: str, effect: str) -> str:
    """A taint as kubectl writes one: ``key=value:Effect`` (``key:Effect`` without a value)."""
    return f"{key}={value}:{effect}" if value else f"{key}:{effect}"


# Kueue writes a taint with Go's struct printing: {key value Effect <nil>}
# (TimeAdded last), or {key  Effect <nil>} without a value.
_GO_TAINT = re.compile(
    r"\{(?P<key>[^\s{}]+) (?P<value>[^\s{}]*) (?P<effect>NoSchedule|PreferNoSchedule|NoExecute)"
    r" [^{}]*\}"
)


def kueue_text(message: str) -> str:
    """Kueue's message with what only a Go programmer reads rewritten for
    people: taints as ``key=value:Effect``. The rest is Kueue's own words."""
    return _GO_TAINT.sub(
        lambda m: taint(m.group("key"), m.group("value"), m.group("effect")), message
    )
