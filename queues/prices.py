"""A flavor's price per GPU-hour: read strictly, written one way.

A price is a decimal string (``"2.49"``, ``"0.8725"``, ``"12"``), as Berth
writes quantities and weights: a JSON number is a binary float and may not be
the amount the admin meant, so it is refused with the rule that says to quote
it. ``null`` means the flavor is not priced (showback then shows no cost for
it); ``0`` means it is free. Every price is in the installation's one
currency (``BERTH_CURRENCY``).

Pure Python: no Django, no kubernetes client. Rule identifiers are stable.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from queues.errors import FieldError

FIELD = "gpu_hour_price"
# Four places: a per-second or spot rate (0.8725 per GPU-hour) is still exact.
MAX_DECIMALS = 4
MAX_PRICE = Decimal(1_000_000)  # per GPU-hour, in any currency (¥, ₩, Rp included)
CENT = Decimal("0.01")
_DECIMAL = re.compile(r"(0|[1-9][0-9]*)(?:\.([0-9]+))?")
EXAMPLE = '"2.49"'


def parse_price(field: str, value: Any) -> tuple[Decimal | None, list[FieldError]]:
    """The price ``value`` gives, or None for null; with every rule it breaks."""
    if value is None:
        return None, []
    if isinstance(value, bool) or not isinstance(value, str):
        kind = "a boolean" if isinstance(value, bool) else f"a {type(value).__name__}"
        return None, [
            FieldError(
                field,
                "type",
                f"must be a decimal string such as {EXAMPLE} (or null: not priced), not {kind}; "
                "a JSON number is a binary float and may not be the amount meant",
            )
        ]
    if value.strip().startswith("-"):
        # "-0" is zero, but reads as a negative amount: no price is written so.
        return None, [FieldError(field, "non-negative", f"{value!r} is negative; use 0 or more")]
    match = _DECIMAL.fullmatch(value)
    if match is None:
        what = "is empty" if value == "" else f"{value!r} is not a plain decimal number"
        return None, [
            FieldError(
                field,
                "decimal-format",
                f"{what}: write digits with an optional point and up to {MAX_DECIMALS} "
                f"decimals, e.g. {EXAMPLE}, no sign, exponent, spaces or leading zeros "
                "(null: not priced)",
            )
        ]
    if len(match.group(2) or "") > MAX_DECIMALS:
        return None, [
            FieldError(
                field,
                "price-precision",
                f"{value} has more than {MAX_DECIMALS} decimals; round it to "
                f"{Decimal(value).quantize(Decimal(1).scaleb(-MAX_DECIMALS))}",
            )
        ]
    price = Decimal(value)
    if price > MAX_PRICE:
        return None, [FieldError(field, "range", f"{value} is above {MAX_PRICE} per GPU-hour")]
    return price, []


def price_text(price: Decimal | None) -> str | None:
    """A price as the API writes it: at least two decimals, at most four
    (``"2.50"``, ``"0.8725"``, ``"12.00"``); None when not priced."""
    if price is None:
        return None
    exact = price.quantize(Decimal(1).scaleb(-MAX_DECIMALS))
    text = format(exact, "f").rstrip("0")
    whole, _, decimals = text.partition(".")
    return f"{whole}.{decimals.ljust(2, '0')}"


def normalised(value: Any) -> Any:
    """A valid price string in its one written form (``"2.5"`` -> ``"2.50"``), so
    that sending the same price again changes nothing; anything else as it was."""
    price, errors = parse_price(FIELD, value)
    return value if errors or price is None else price_text(price)


def cents(amount: Decimal) -> Decimal:
    """Money to the cent (half to even, as accountants round)."""
    return amount.quantize(CENT, rounding=ROUND_HALF_EVEN)
