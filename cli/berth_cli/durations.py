"""Job durations as people type them: ``90``, ``90s``, ``15m``, ``2h``,
``1d``, ``1h30m``. One reading for the API (``jobs.validation``) and the CLI.

Standard library only: this package installs on laptops without the server.
"""

from __future__ import annotations

import re

_DURATION_PART = re.compile(r"(\d+)([smhd]?)")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
DURATION_FORMS = "use seconds or a number with s, m, h or d (90, 90s, 15m, 2h, 1d, 1h30m)"


class DurationError(ValueError):
    """Text that is not a duration; the message says what would be."""


def parse_duration(text: str) -> int:
    """Seconds in ``90``, ``90s``, ``15m``, ``2h``, ``1d`` or ``1h30m``.

    A bare number is seconds, but only on its own: ``1h30`` is refused
    rather than guessed at."""
    value = text.strip().lower()
    parts = _DURATION_PART.findall(value)
    if not value or "".join(n + u for n, u in parts) != value:
        raise DurationError(f"{text!r} is not a duration: {DURATION_FORMS}")
    if len(parts) > 1 and any(unit == "" for _, unit in parts):
        raise DurationError(f"{text!r} is not a duration: give every number a unit, e.g. 1h30m")
    return sum(int(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def format_duration(seconds: int) -> str:
    """The exact duration in the form ``parse_duration`` reads: 5400 → ``1h30m``."""
    if seconds <= 0:
        return "0s"
    parts = []
    rest = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
