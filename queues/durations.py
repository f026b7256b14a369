"""Go durations, as Kueue's manager configuration spells them (``30s``, ``5m``,
``1h30m``, ``168h``): parsed the way Go's ``time.ParseDuration`` parses them,
written back in the shortest form it reads.

Berth stores them as integer nanoseconds, Go's own unit, so every duration
Kueue accepts round-trips exactly and the limit is Go's (an int64).

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import re
from fractions import Fraction

from queues import display

NANOSECOND = 1
MICROSECOND = 1_000
MILLISECOND = 1_000_000
SECOND = 1_000_000_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
MAX_NANOSECONDS = 2**63 - 1

# Go accepts both the micro sign (U+00B5) and the Greek mu (U+03BC) for microseconds.
_UNITS = {
    "ns": NANOSECOND,
    "us": MICROSECOND,
    "\u00b5s": MICROSECOND,
    "\u03bcs": MICROSECOND,
    "ms": MILLISECOND,
    "s": SECOND,
    "m": MINUTE,
    "h": HOUR,
}
_PART = re.compile(r"(\d*)(?:\.(\d*))?([^\d.]+)")
FORMS = "a Go duration such as 30s, 5m, 1h30m or 168h (units: ns, us, ms, s, m, h)"


class DurationError(ValueError):
    """Text that is not a Go duration; the message says what would be."""


def parse(text: str) -> int:
    """Nanoseconds in ``text``: a sign, then one or more decimal numbers each
    with a unit (``1.5h``, ``1h30m``, ``300ms``); ``0`` alone needs none."""
    if not isinstance(text, str):
        raise DurationError(f"must be a string: {FORMS}")
    rest = text
    sign = 1
    if rest[:1] in ("-", "+"):
        sign = -1 if rest[0] == "-" else 1
        rest = rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise DurationError(f"{text!r} is not a duration: {FORMS}")
    total = Fraction(0)
    position = 0
    while position < len(rest):
        match = _PART.match(rest, position)
        if match is None:
            raise DurationError(f"{text!r} is not a duration: every number needs a unit; {FORMS}")
        whole, fraction, unit = match.groups()
        if not whole and not fraction:
            raise DurationError(f"{text!r} is not a duration: a unit without a number; {FORMS}")
        if unit not in _UNITS:
            raise DurationError(f"{text!r} is not a duration: unknown unit {unit!r}; {FORMS}")
        value = Fraction(int(whole or "0"))
        if fraction:
            value += Fraction(int(fraction), 10 ** len(fraction))
        total += value * _UNITS[unit]
        position = match.end()
    nanoseconds = int(total)  # Go drops what is below a nanosecond
    if nanoseconds > MAX_NANOSECONDS:
        raise DurationError(f"{text!r} is longer than Go's longest duration (about 292 years)")
    return sign * nanoseconds


def format_go(nanoseconds: int) -> str:
    """The shortest text ``parse`` (and Go) reads back as exactly this value:
    ``168h``, ``1h30m``, ``5m``, ``1s500ms``; ``0s`` for zero."""
    if nanoseconds == 0:
        return "0s"
    sign = "-" if nanoseconds < 0 else ""
    rest = abs(nanoseconds)
    parts = []
    for unit, size in (
        ("h", HOUR),
        ("m", MINUTE),
        ("s", SECOND),
        ("ms", MILLISECOND),
        ("us", MICROSECOND),
        ("ns", NANOSECOND),
    ):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count}{unit}")
    return sign + "".join(parts)


def describe(nanoseconds: int | None) -> str:
    """In words for a page: ``5 min``, ``7 d``, ``1 h 30 min`` (as Berth writes
    every duration, ``queues.display``); under a second in milliseconds."""
    if nanoseconds is None:
        return display.DASH
    if 0 < abs(nanoseconds) < SECOND:
        return f"{nanoseconds / MILLISECOND:g} ms"
    return display.duration(nanoseconds / SECOND)
