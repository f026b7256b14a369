"""Kueue's wording: resource order inside a pod set and quantities as Kubernetes
prints them, so Berth's "why pending" reads like Kueue's own condition message.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Final

from queues.quantity import Unit, unit_for

_FNV_OFFSET: Final = 14695981039346656037
_FNV_PRIME: Final = 1099511628211
_MASK: Final = 2**64 - 1


# Resource names are few and a replay asks for their order millions of times.
@functools.cache
def fnv1a64(text: str) -> int:
    value = _FNV_OFFSET
    for byte in text.encode("utf-8"):
        value = ((value ^ byte) * _FNV_PRIME) & _MASK
    return value


# Each set of resource names asked about, as given, in walk order: a policy
# has a handful, and every flavor assignment asks for each pod set's order
# (1.5% of a replay, sorted anew each time).
_WALK_ORDERS: Final[dict[tuple[str, ...], tuple[str, ...]]] = {}


def request_order(resources: Iterable[str]) -> tuple[str, ...]:
    """The order Kueue walks a pod set's resources in (FNV-1a hash, then name);
    it decides which failing resource group a message reports."""
    given = tuple(resources)
    known = _WALK_ORDERS.get(given)
    if known is None:
        if len(_WALK_ORDERS) >= 4096:  # names from unbounded input: kept bounded
            _WALK_ORDERS.clear()
        known = _WALK_ORDERS[given] = tuple(sorted(given, key=_walk_key))
    return known


def _walk_key(name: str) -> tuple[int, str]:
    return fnv1a64(name), name


_DECIMAL_SUFFIXES = {-3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIXES = [
    ("Ei", 2**60),
    ("Pi", 2**50),
    ("Ti", 2**40),
    ("Gi", 2**30),
    ("Mi", 2**20),
    ("Ki", 2**10),
]


def _decimal_si(mantissa: int, exponent: int) -> str:
    """Canonical DecimalSI: the largest power-of-1000 suffix with a whole number."""
    if mantissa == 0:
        return "0"
    while mantissa % 1000 == 0 and exponent + 3 <= 18:
        mantissa //= 1000
        exponent += 3
    return f"{mantissa}{_DECIMAL_SUFFIXES[exponent]}"


# A replay words the same few request sizes in millions of pending messages.
@functools.lru_cache(maxsize=4096)
def kubernetes_quantity(resource: str, amount: int) -> str:
    """How Kubernetes prints a canonical amount: cpu as milli DecimalSI (500m,
    2, 2500m), memory-like as BinarySI when exact (1536Mi), else DecimalSI (1G),
    counts as DecimalSI (8, 1k)."""
    unit = unit_for(resource)
    if unit is Unit.MILLI:
        return _decimal_si(amount, -3)
    if unit is Unit.BYTES and amount and amount % 1024 == 0:
        for suffix, factor in _BINARY_SUFFIXES:
            if amount % factor == 0:
                return f"{amount // factor}{suffix}"
    if unit is Unit.BYTES and 0 < amount < 1024:
        return str(amount)
    return _decimal_si(amount, 0)
