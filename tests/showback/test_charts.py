"""The usage page's chart builders and number formats (frontend/charts/showback.py):
pure, deterministic, never a raw float in what they write."""

from __future__ import annotations

import json
from decimal import Decimal

from frontend.charts.showback import (
    format_hours,
    format_money,
    format_share,
    usage_cost,
    usage_hours,
)

ROWS = [
    {
        "label": "research · training",
        "allocated_gpu_hours": 32.0,
        "busy_gpu_hours": 3.6123,
        "lost_gpu_hours": 0.0,
        "cost": "83.76",
        "lost_cost": None,
    },
    {
        "label": "research · evaluation",
        "allocated_gpu_hours": 18.666666,
        "busy_gpu_hours": None,
        "lost_gpu_hours": 2.666666,
        "cost": "16.29",
        "lost_cost": "2.33",
    },
    {
        "label": "vision · training",
        "allocated_gpu_hours": 5.0,
        "busy_gpu_hours": None,
        "lost_gpu_hours": 0.0,
        "cost": None,
        "lost_cost": None,
    },
]


def test_hours_have_one_decimal_and_money_two_with_the_currency() -> None:
    assert [format_hours(v) for v in (1234.56, 0.0, 0.04, 18.666666, None, float("nan"))] == [
        "1,234.6",
        "0.0",
        "< 0.1",
        "18.7",
        "—",
        "—",
    ]
    assert format_money("1234.5", "USD") == "1,234.50 USD"
    assert format_money(Decimal("0.005"), "EUR") == "0.00 EUR"  # half to even
    assert format_money(Decimal("0.015"), "EUR") == "0.02 EUR"
    assert format_money(None, "USD") == "—" and format_money("NaN", "USD") == "—"
    assert format_share(3, 4) == "75 %" and format_share(None, 4) == "—"
    assert format_share(1, 0) == "—"


def test_the_hours_chart_has_allocated_busy_and_lost_largest_first() -> None:
    chart = usage_hours(ROWS, group="team · type")
    names = [trace["name"] for trace in chart.figure["data"]]
    assert names == ["allocated", "busy", "lost to preemption"]
    allocated = chart.figure["data"][0]
    assert allocated["y"] == ["research · training", "research · evaluation", "vision · training"]
    assert allocated["x"] == [32.0, 18.7, 5.0]
    assert chart.table.headers[0] == "team · type"
    assert chart.table.rows[1] == ["research · evaluation", "18.7", "—", "2.7"]


def test_the_cost_chart_leaves_out_what_has_no_price() -> None:
    chart = usage_cost(ROWS, currency="USD")
    kept, lost = chart.figure["data"]
    assert kept["y"] == ["research · training", "research · evaluation"]
    assert kept["x"] == [83.76, 13.96] and lost["x"] == [0.0, 2.33]
    assert chart.table.rows == [
        ["research · training", "83.76 USD", "—"],
        ["research · evaluation", "16.29 USD", "2.33 USD"],
    ]
    assert chart.figure["layout"]["xaxis"]["title"]["text"] == "cost (USD)"


def test_the_same_rows_in_any_order_give_the_same_figure() -> None:
    for build in (lambda rows: usage_hours(rows), lambda rows: usage_cost(rows, currency="USD")):
        assert build(ROWS).figure_json() == build(list(reversed(ROWS))).figure_json()
        json.loads(build(ROWS).figure_json())


def test_no_rows_is_an_empty_chart() -> None:
    assert usage_hours([]).empty and usage_cost([], currency="USD").empty
    assert usage_cost([ROWS[2]], currency="USD").empty  # nothing priced
