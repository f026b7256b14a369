"""Kubernetes quantities are parsed exactly and stored as canonical integers."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from queues.quantity import (
    INT64_MAX,
    QuantityError,
    format_canonical,
    format_readable,
    parse_decimal,
    to_canonical,
)


@pytest.mark.parametrize(
    ("resource", "text", "canonical"),
    [
        ("cpu", "500m", 500),
        ("cpu", "64", 64_000),
        ("cpu", "1.5", 1_500),
        ("cpu", 2, 2_000),
        ("cpu", "1e3", 1_000_000),
        ("memory", "4Ti", 4 * 2**40),
        ("memory", "1.5Gi", 1536 * 2**20),
        ("memory", "2G", 2 * 10**9),
        ("memory", "128974848", 128974848),
        ("ephemeral-storage", "10Gi", 10 * 2**30),
        ("hugepages-2Mi", "1Gi", 2**30),
        ("nvidia.com/gpu", "64", 64),
        ("nvidia.com/gpu", "0", 0),
        ("pods", "1k", 1000),
    ],
)
def test_parses_exactly(resource: str, text: str | int, canonical: int) -> None:
    assert to_canonical(resource, text) == canonical


@pytest.mark.parametrize(
    ("resource", "text", "rule"),
    [
        ("nvidia.com/gpu", "1.5", "precision"),
        ("nvidia.com/gpu", "500m", "precision"),
        ("cpu", "0.0001", "precision"),
        ("memory", "0.5", "precision"),
        ("cpu", "12XB", "format"),
        ("cpu", "1.2.3", "format"),
        ("cpu", "", "format"),
        ("cpu", "Ki", "format"),
        ("memory", "100Ei", "range"),
        ("cpu", True, "format"),
    ],
)
def test_refuses_what_cannot_be_stored_exactly(resource: str, text: object, rule: str) -> None:
    with pytest.raises(QuantityError) as excinfo:
        to_canonical(resource, text)  # type: ignore[arg-type]
    assert excinfo.value.rule == rule


def test_negative_parses_so_rules_can_name_it() -> None:
    assert to_canonical("nvidia.com/gpu", "-1") == -1
    assert parse_decimal("-500m") == Decimal("-0.5")


@pytest.mark.parametrize(
    ("resource", "canonical", "text"),
    [
        ("cpu", 500, "500m"),
        ("cpu", 64_000, "64"),
        ("cpu", 1_500, "1500m"),
        ("memory", 6 * 2**40, "6Ti"),
        ("memory", 1536 * 2**20, "1536Mi"),
        ("memory", 2 * 10**9, "2G"),
        ("memory", 1001, "1001"),
        ("memory", 0, "0"),
        ("nvidia.com/gpu", 8, "8"),
    ],
)
def test_formats_in_kubernetes_notation(resource: str, canonical: int, text: str) -> None:
    assert format_canonical(resource, canonical) == text


@given(
    resource=st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods", "hugepages-1Gi"]),
    amount=st.integers(min_value=0, max_value=INT64_MAX),
)
def test_format_then_parse_round_trips(resource: str, amount: int) -> None:
    assert to_canonical(resource, format_canonical(resource, amount)) == amount


@pytest.mark.parametrize(
    ("resource", "text"),
    [
        ("nvidia.com/gpu", "1.00000000000000000000000000001"),
        ("memory", "1.0000000000000000000000000001Ki"),
    ],
)
def test_no_rounding_beyond_28_digits(resource: str, text: str) -> None:
    with pytest.raises(QuantityError) as excinfo:
        to_canonical(resource, text)
    assert excinfo.value.rule == "precision"


def test_overlong_quantity_is_refused() -> None:
    with pytest.raises(QuantityError, match="at most 64"):
        to_canonical("cpu", "9" * 65)


@pytest.mark.parametrize(
    ("resource", "amount", "shown"),
    [
        # What the team page's Lent column used to show raw.
        ("cpu", 117091, "117"),
        ("memory", 1341071000545, "1.22Ti"),
        # Whole and short: Kubernetes notation, as the quotas were written.
        ("cpu", 24000, "24"),
        ("cpu", 500, "500m"),
        ("memory", 6 * 2**40, "6Ti"),
        ("memory", 256 * 2**30, "256Gi"),
        ("memory", 1536 * 2**20, "1536Mi"),
        # Not whole: three significant digits in the largest fitting unit.
        ("cpu", 1500, "1.5"),
        ("cpu", 12345, "12.3"),
        ("memory", 123456, "121Ki"),
        ("memory", 512, "512"),
        ("nvidia.com/gpu", 13, "13"),
        ("cpu", -117091, "-117"),
    ],
)
def test_readable_amounts(resource: str, amount: int, shown: str) -> None:
    assert format_readable(resource, amount) == shown


@given(st.sampled_from(["cpu", "memory"]), st.integers(min_value=0, max_value=2**62))
def test_a_readable_amount_is_short_and_never_a_bare_stored_integer(
    resource: str, amount: int
) -> None:
    if resource == "cpu":
        amount %= 10**9  # up to a million cores
    shown = format_readable(resource, amount)
    assert len(shown) <= 7, shown
    if resource == "memory" and amount >= 1024:
        assert not shown.isdigit(), shown  # a unit where one belongs
    if resource == "cpu" and amount % 1000:
        assert shown.endswith("m") == (amount < 1000), shown
