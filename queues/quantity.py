"""Kubernetes resource quantities, parsed exactly and stored as integers.

Berth keeps every quantity in a canonical integer unit so that sums and
comparisons are exact: milli-CPU for ``cpu``, bytes for memory-like resources,
and plain counts for everything else (``pods``, ``nvidia.com/gpu`` and other
extended resources, which Kubernetes only allows as whole numbers).

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import re
from decimal import Context, Decimal, Inexact, InvalidOperation, localcontext
from enum import Enum
from typing import Any

INT64_MAX = 2**63 - 1

_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)
# Enough digits that no accepted quantity is ever rounded: at most 64 characters
# of input, scaled by at most 10**30 or 2**60.
MAX_QUANTITY_LENGTH = 64
_EXACT = Context(prec=MAX_QUANTITY_LENGTH + 40, traps=[Inexact, InvalidOperation])

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}


class Unit(Enum):
    """The canonical integer unit a resource is stored in."""

    MILLI = "milli"
    BYTES = "bytes"
    COUNT = "count"


_MEMORY_LIKE = ("memory", "ephemeral-storage", "storage")


def unit_for(resource: str) -> Unit:
    """Which canonical unit Berth stores ``resource`` in."""
    if resource == "cpu":
        return Unit.MILLI
    if resource in _MEMORY_LIKE or resource.startswith("hugepages-"):
        return Unit.BYTES
    return Unit.COUNT


class QuantityError(ValueError):
    """A quantity that is malformed, or not representable in its resource's unit."""

    def __init__(self, message: str, rule: str) -> None:
        super().__init__(message)
        self.rule = rule


def written_negative(text: Any) -> bool:
    """Whether a quantity is written with a minus sign: ``-0`` is zero, but
    reads as a negative amount, and no non-negative setting should accept it."""
    return isinstance(text, str) and text.strip().startswith("-")


def parse_decimal(text: str | int) -> Decimal:
    """The exact value of a Kubernetes quantity string in base units.

    ``"500m"`` is 0.5, ``"4Ti"`` is 4 * 2**40, ``"1.5"`` is 1.5, ``"1e3"`` is 1000.
    """
    if isinstance(text, bool):
        raise QuantityError("must be a quantity such as 64, 500m or 4Ti, not a boolean", "format")
    if isinstance(text, int):
        return Decimal(text)
    if not isinstance(text, str):
        raise QuantityError("must be a quantity string such as 64, 500m or 4Ti", "format")
    if len(text) > MAX_QUANTITY_LENGTH:
        raise QuantityError(
            f"is {len(text)} characters long; a quantity has at most {MAX_QUANTITY_LENGTH}",
            "format",
        )
    match = _QUANTITY.fullmatch(text.strip())
    if not match:
        raise QuantityError(
            f"{text!r} is not a Kubernetes quantity: use a number with an optional suffix "
            "(m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei), e.g. 64, 500m, 4Ti",
            "format",
        )
    suffix = match["suffix"] or ""
    with localcontext(_EXACT):
        number = Decimal(match["number"])
        if suffix in _BINARY:
            number *= _BINARY[suffix]
        elif suffix in _DECIMAL:
            number *= _DECIMAL[suffix]
        else:
            exponent = int(suffix[1:])
            if abs(exponent) > 30:
                raise QuantityError(f"{text!r} has an exponent out of range", "range")
            number = number.scaleb(exponent)
        return -number if match["sign"] == "-" else number


def to_canonical(resource: str, text: str | int) -> int:
    """Parse ``text`` for ``resource`` into its canonical integer unit.

    Refuses what cannot be stored exactly: sub-milli CPU, fractional bytes,
    fractional counts (``0.5`` GPUs), and values beyond int64.
    """
    value = parse_decimal(text)
    unit = unit_for(resource)
    with localcontext(_EXACT):
        scaled = value * 1000 if unit is Unit.MILLI else value
        fractional = scaled != scaled.to_integral_value()
    if fractional:
        finest = {
            Unit.MILLI: "cpu has a precision of 1m (one thousandth of a core)",
            Unit.BYTES: f"{resource} is counted in whole bytes",
            Unit.COUNT: f"{resource} is counted in whole units",
        }[unit]
        raise QuantityError(f"{text!r} is finer than allowed: {finest}", "precision")
    canonical = int(scaled)
    if abs(canonical) > INT64_MAX:
        raise QuantityError(f"{text!r} is too large", "range")
    return canonical


_BINARY_DESCENDING = sorted(_BINARY.items(), key=lambda item: -item[1])
_DECIMAL_DESCENDING = [
    ("E", 10**18),
    ("P", 10**15),
    ("T", 10**12),
    ("G", 10**9),
    ("M", 10**6),
    ("k", 10**3),
]


def format_canonical(resource: str, amount: int) -> str:
    """Kubernetes notation for a canonical amount: 500m, 64, 6Ti, 1536Mi."""
    unit = unit_for(resource)
    if unit is Unit.MILLI:
        whole, milli = divmod(abs(amount), 1000)
        sign = "-" if amount < 0 else ""
        return f"{sign}{whole}" if milli == 0 else f"{amount}m"
    if unit is Unit.BYTES and amount != 0:
        # The largest exact binary and decimal suffixes; the shorter number wins
        # (6Ti, 2G, 1536Mi), binary on a tie since memory is sold in GiB.
        candidates = [
            next(((amount // f, s) for s, f in suffixes if amount % f == 0), (amount, ""))
            for suffixes in (_BINARY_DESCENDING, _DECIMAL_DESCENDING)
        ]
        number, suffix = min(candidates, key=lambda c: len(str(abs(c[0]))))
        return f"{number}{suffix}"
    return str(amount)


def format_readable(resource: str, amount: int) -> str:
    """A canonical amount for people to read: Kubernetes notation when that is
    short and whole (``500m``, ``24``, ``6Ti``, ``1536Mi``), else rounded to
    three significant digits in the largest unit that keeps it at least one —
    CPU in cores (``117``, ``1.5``), memory in binary units (``1.22Ti``,
    ``121Ki``). Measured
    amounts (usage, lent) are rarely round, and ``117091m`` or
    ``1341071000545`` read as noise. For display only: write quotas with
    ``format_canonical``, which is exact."""
    exact = format_canonical(resource, amount)
    unit = unit_for(resource)
    sign = "-" if amount < 0 else ""
    magnitude = abs(amount)
    if unit is Unit.COUNT:
        return exact
    if unit is Unit.MILLI:
        if magnitude % 1000 == 0 or magnitude < 1000:
            return exact
        return sign + _significant(Decimal(magnitude) / 1000)
    if magnitude < 1024 or (not exact[-1].isdigit() and len(exact) <= 6):
        return exact
    suffix, factor = next(((s, f) for s, f in _BINARY_DESCENDING if magnitude >= f), ("", 1))
    return sign + _significant(Decimal(magnitude) / factor) + suffix


def _significant(value: Decimal) -> str:
    """Three significant digits, never in exponent form, no trailing zeros."""
    if value >= 100:
        text = f"{value:.0f}"
    elif value >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return text.rstrip("0").rstrip(".") if "." in text else text
