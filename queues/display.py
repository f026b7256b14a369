"""How Berth writes values for people, in one place: durations, start
estimates and Kueue's messages. Pages, charts, the CLI and the API's text
fields all use these, so 100,000 s reads the same everywhere.

Pure Python: no Django, no kubernetes client (the CLI imports it).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

DASH = "—"
_UNITS = ((86400, "d"), (3600, "h"), (60, "min"), (1, "s"))


def duration(seconds: float | None) -> str:
    """``45 s``, ``4 min 30 s``, ``2 h 5 min``, ``1 d 3 h``: the largest unit and
    the next one down when it is not zero; ``—`` for unknown."""
    if seconds is None:
        return DASH
    total = max(0, round(float(seconds)))
    if total == 0:
        return "0 s"
    parts = []
    for size, unit in _UNITS:
        count, total = divmod(total, size)
        parts.append((count, unit))
    first = next(i for i, (count, _) in enumerate(parts) if count)
    shown = [f"{count} {unit}" for count, unit in parts[first : first + 2] if count]
    return " ".join(shown)


def gpu_hours(value: float | None) -> str:
    """GPU-hours: two decimals under 10, one above, trailing zeros dropped, and
    ``< 0.01`` for a small amount that would otherwise read as nothing."""
    if value is None:
        return DASH
    if 0 < abs(value) < 0.005:
        return "< 0.01"
    shown = f"{value:,.2f}" if abs(value) < 10 else f"{value:,.1f}"
    return shown.rstrip("0").rstrip(".") if "." in shown else shown


def timestamp(moment: datetime) -> str:
    """An absolute time where one must be written out (CLI, e-mail, CSV):
    ``2026-12-01 14:05:03 UTC``."""
    at = moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    return at.strftime("%Y-%m-%d %H:%M:%S UTC")


def relative(moment: datetime, now: datetime) -> str:
    """``just now``, ``5 min ago``, ``in 2 h 10 min``."""
    delta = (now - moment).total_seconds()
    if abs(delta) < 5:
        return "just now"
    return f"{duration(delta)} ago" if delta > 0 else f"in {duration(-delta)}"


def start_estimate(earliest: datetime | None, latest: datetime | None, now: datetime) -> str:
    """When a pending job may start: ``now``, ``in 5 min – 20 min``, ``in 1 h
    or later``, or that no estimate can be made (work ahead of it declared no
    run time)."""
    if earliest is None and latest is None:
        return "not foreseeable (work ahead of it declared no run time)"
    low = max(0.0, (earliest - now).total_seconds()) if earliest else 0.0
    if latest is None:
        return "now or later" if low < 5 else f"in {duration(low)} or later"
    high = max(low, (latest - now).total_seconds())
    if high < 5:
        return "now"
    if round(low) == round(high):
        return f"in {duration(low)}"
    return f"in {duration(low)} – {duration(high)}"


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
