"""How Berth writes times for people: durations, moments and start
estimates, so 100,000 s reads the same on the pages, in the API's text fields
and in the CLI (``compact``: one word per value, for terminal tables).

Standard library only: this package installs on laptops without the server.
"""

from __future__ import annotations

from datetime import UTC, datetime

DASH = "—"
_UNITS = ((86400, "d"), (3600, "h"), (60, "min"), (1, "s"))
_COMPACT = ((86400, "d"), (3600, "h"), (60, "m"), (1, "s"))


def duration(seconds: float | None, *, compact: bool = False) -> str:
    """``45 s``, ``4 min 30 s``, ``2 h 5 min``, ``1 d 3 h``: the largest unit and
    the next one down when it is not zero; ``—`` for unknown. ``compact`` spells
    the same value without spaces for terminal tables (``4m30s``, ``1d3h``), so
    a column stays one word for ``awk``."""
    if seconds is None:
        return DASH
    total = max(0, round(float(seconds)))
    units, gap = (_COMPACT, "") if compact else (_UNITS, " ")
    counts = []
    for size, unit in units:
        count, total = divmod(total, size)
        counts.append((count, unit))
    first = next((i for i, (count, _) in enumerate(counts) if count), None)
    if first is None:
        return f"0{gap}s"
    # The largest unit, and the next one down unless it is zero: never "3 d 1 min".
    return gap.join(f"{count}{gap}{unit}" for count, unit in counts[first : first + 2] if count)


def timestamp(moment: datetime, *, compact: bool = False) -> str:
    """An absolute time where one must be written out (CLI, e-mail, CSV):
    ``2026-12-01 14:05:03 UTC`` (compact: ``2026-12-01 14:05:03Z``)."""
    at = moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    return at.strftime("%Y-%m-%d %H:%M:%SZ" if compact else "%Y-%m-%d %H:%M:%S UTC")


def relative(moment: datetime, now: datetime, *, compact: bool = False) -> str:
    """``just now``, ``5 min ago``, ``in 2 h 10 min`` (compact: ``5m ago``)."""
    delta = (now - moment).total_seconds()
    if abs(delta) < 5:
        return "just now"
    if delta > 0:
        return f"{duration(delta, compact=compact)} ago"
    return f"in {duration(-delta, compact=compact)}"


def start_estimate(
    earliest: datetime | None, latest: datetime | None, now: datetime, *, compact: bool = False
) -> str:
    """When a pending job may start: ``now``, ``in 5 min – 20 min``, ``in 1 h
    or later``, or that it does not within the 30 days the engine looks ahead
    (``queues.engine.estimate.HORIZON``): work ahead of it declared no run
    time, say."""
    if earliest is None and latest is None:
        return "not within 30 days (work ahead of it may declare no run time)"
    low = max(0.0, (earliest - now).total_seconds()) if earliest else 0.0
    if latest is None:
        return "now or later" if low < 5 else f"in {duration(low, compact=compact)} or later"
    high = max(low, (latest - now).total_seconds())
    if high < 5:
        return "now"
    if round(low) == round(high):
        return f"in {duration(low, compact=compact)}"
    return f"in {duration(low, compact=compact)} – {duration(high, compact=compact)}"
