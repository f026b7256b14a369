"""A flavor's price per GPU-hour: read strictly (a decimal string, up to four
places, never "-0", NaN, a float or words), written one way, changed through
the API and the policy editor, and every change in the history."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from queues.choices import PolicyKind
from queues.models import PolicyChange, ResourceFlavor
from queues.prices import parse_price, price_text
from tests.factories import flavor, token_client, user
from tests.frontend.policy_editor_support import form_data, text

URL = "/api/v1/resource-flavors/"


@pytest.mark.parametrize(
    ("value", "price"),
    [
        ("2.49", Decimal("2.49")),
        ("0", Decimal(0)),
        ("0.8725", Decimal("0.8725")),
        ("12", Decimal(12)),
        ("1000000", Decimal(1_000_000)),
        (None, None),
    ],
)
def test_a_price_is_a_plain_decimal(value: Any, price: Decimal | None) -> None:
    assert parse_price("p", value) == (price, [])


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("-0", "non-negative"),
        ("-0.00", "non-negative"),
        (" -1", "non-negative"),
        ("NaN", "decimal-format"),
        ("Infinity", "decimal-format"),
        ("1e3", "decimal-format"),
        ("2,49", "decimal-format"),
        (" 2.49", "decimal-format"),
        ("2.", "decimal-format"),
        (".5", "decimal-format"),
        ("02.5", "decimal-format"),
        ("", "decimal-format"),
        ("cheap", "decimal-format"),
        ("２.49", "decimal-format"),
        ("2.12345", "price-precision"),
        ("1000000.0001", "range"),
        (2.49, "type"),
        (2, "type"),
        (True, "type"),
        ([], "type"),
    ],
)
def test_anything_else_is_refused_with_its_rule(value: Any, rule: str) -> None:
    price, errors = parse_price("gpu_hour_price", value)
    assert price is None and [(e.field, e.rule) for e in errors] == [("gpu_hour_price", rule)]


def test_a_price_is_written_with_two_to_four_decimals() -> None:
    shown = [price_text(Decimal(v)) for v in ("2.5", "3", "0.8725", "1.2300", "0")]
    assert shown == ["2.50", "3.00", "0.8725", "1.23", "0.00"]
    assert price_text(None) is None


@pytest.fixture
def admin(db: Any, settings: Any) -> APIClient:
    settings.BERTH_RECONCILE_ON_CHANGE = False
    return token_client(user("root", superuser=True))


def price_history(name: str) -> list[tuple[str, Any, Any]]:
    return [
        (c.action, (c.before or {}).get("gpu_hour_price"), (c.after or {}).get("gpu_hour_price"))
        for c in PolicyChange.objects.filter(
            kind=PolicyKind.RESOURCE_FLAVOR, object_name=name
        ).order_by("at", "id")
    ]


def test_the_api_sets_changes_and_clears_a_price_and_history_keeps_each(
    admin: APIClient,
) -> None:
    created = admin.post(URL, {"name": "h100", "gpu_hour_price": "2.5"}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["gpu_hour_price"] == "2.50"
    revision = created.json()["revision"]
    same = admin.patch(f"{URL}h100/", {"gpu_hour_price": "2.5"}, format="json")
    assert same.json()["revision"] == revision  # the same price, written again: nothing changed
    admin.patch(f"{URL}h100/", {"gpu_hour_price": "3.0125"}, format="json")
    body = admin.get(f"{URL}h100/").json()
    assert body["gpu_hour_price"] == "3.0125"
    del body["revision"], body["created_at"], body["updated_at"]
    # What you GET you can PUT back.
    assert admin.put(f"{URL}h100/", body, format="json").status_code == 200
    admin.patch(f"{URL}h100/", {"gpu_hour_price": None}, format="json")
    assert ResourceFlavor.objects.get(name="h100").gpu_hour_price is None
    assert price_history("h100") == [
        ("created", None, "2.50"),
        ("updated", "2.50", "3.0125"),
        ("updated", "3.0125", None),
    ]
    history = admin.get("/api/v1/policy/history/", {"kind": "resource-flavor"}).json()
    assert any("gpu_hour_price" in entry["changed_fields"] for entry in history["results"])


@pytest.mark.parametrize(
    ("price", "rule"),
    [
        ("-0", "non-negative"),
        ("NaN", "decimal-format"),
        (2.49, "type"),
        ("9.99999", "price-precision"),
    ],
)
def test_the_api_refuses_a_bad_price_naming_the_field_and_changes_nothing(
    admin: APIClient, price: Any, rule: str
) -> None:
    flavor("h100", gpu_hour_price="2.49")
    before = PolicyChange.objects.count()
    response = admin.patch(f"{URL}h100/", {"gpu_hour_price": price}, format="json")
    assert response.status_code == 400
    assert [(e["field"], e["rule"]) for e in response.json()["errors"]] == [
        ("gpu_hour_price", rule)
    ]
    assert ResourceFlavor.objects.get(name="h100").gpu_hour_price == Decimal("2.49")
    assert PolicyChange.objects.count() == before


def test_a_member_may_read_a_price_but_not_change_it(admin: APIClient) -> None:
    flavor("h100", gpu_hour_price="2.49")
    member = token_client(user("alice"))
    assert member.get(f"{URL}h100/").json()["gpu_hour_price"] == "2.49"
    assert member.patch(f"{URL}h100/", {"gpu_hour_price": "0"}, format="json").status_code == 403


def test_the_policy_editor_sets_and_clears_the_price(admin: APIClient) -> None:
    flavor("h100")
    browser = Client()
    browser.force_login(user("editor", superuser=True))
    page = text(browser.get("/policy/flavor/h100/"))
    assert "Price per GPU-hour (USD)" in page
    data = form_data(page)
    assert data["gpu_hour_price"] == ""
    refused = browser.post(
        "/policy/flavor/h100/", {**data, "gpu_hour_price": "-0", "action": "apply"}
    )
    assert refused.status_code == 200
    assert 'data-field="gpu_hour_price" data-rule="non-negative"' in text(refused)
    assert "Refused: nothing was changed" in text(refused)
    assert ResourceFlavor.objects.get(name="h100").gpu_hour_price is None
    done = browser.post(
        "/policy/flavor/h100/", {**data, "gpu_hour_price": "2.49", "action": "apply"}
    )
    assert done.status_code == 302
    assert ResourceFlavor.objects.get(name="h100").gpu_hour_price == Decimal("2.49")
    data = form_data(text(browser.get("/policy/flavor/h100/")))
    assert data["gpu_hour_price"] == "2.49"
    browser.post("/policy/flavor/h100/", {**data, "gpu_hour_price": "", "action": "apply"})
    assert ResourceFlavor.objects.get(name="h100").gpu_hour_price is None
    assert price_history("h100")[-2:] == [("updated", None, "2.49"), ("updated", "2.49", None)]
    change = PolicyChange.objects.filter(object_name="h100").first()
    assert change is not None and change.actor_username == "editor"
