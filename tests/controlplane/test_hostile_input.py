"""Input a careless client or an attacker sends, which once answered 500: an
OPTIONS request asking for CSV, time offsets PostgreSQL refuses, unpaired
surrogates in JSON keys and NUL characters in paths, filters, forms and
bodies. Each is answered 200 or a 400 that names the field and the rule, and
changes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import AccessDenial
from queues.models import ResourceFlavor
from tests.factories import flavor

API = "/api/v1"


def errors(response: Any) -> list[tuple[str, str]]:
    assert response.status_code == 400, response.content
    return [(e["field"], e["rule"]) for e in response.json()["errors"]]


def post_json(client: APIClient, url: str, body: str) -> Any:
    return client.generic("POST", url, body, content_type="application/json")


def test_options_on_the_csv_history_is_described_in_json(admin_client: APIClient) -> None:
    response = admin_client.options(f"{API}/approvals/history/?format=csv")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["name"]


@pytest.mark.parametrize(
    "url",
    [
        "access-denials/?since={t}",
        "access-denials/?until={t}",
        "jobs/?submitted_before={t}",
        "jobs/?submitted_after={t}",
        "policy/history/?since={t}",
        "policy/history/?until={t}",
    ],
)
def test_a_time_filter_takes_any_offset_iso_8601_allows(admin_client: APIClient, url: str) -> None:
    AccessDenial.objects.create(reason=AccessDenial.Reason.FORBIDDEN, path="/x", method="GET")
    response = admin_client.get(f"{API}/{url.format(t='2026-01-01T00:00:00%2B19:00')}")
    assert response.status_code == 200, response.content
    # 2026-01-01 00:00 at +19:00 is 2025-12-31 05:00 UTC: the row made now is after it.
    if url.startswith("access-denials/?since"):
        assert response.json()["count"] == 1


def test_a_time_that_utc_cannot_hold_names_the_field(admin_client: APIClient) -> None:
    response = admin_client.get(f"{API}/jobs/?submitted_before=9999-12-31T23:00:00-05:00")
    assert errors(response) == [("submitted_before", "out-of-range")]


@pytest.mark.parametrize(
    ("url", "body", "field"),
    [
        ("jobs/", {"name": "x", "env": {"\ud800": "1"}}, "env"),
        ("jobs/", {"name": "x", "labels": {"a": "b", "\ud800": "1"}}, "labels"),
        ("resource-flavors/", {"name": "f", "node_labels": {"\udfff": "x"}}, "node_labels"),
        ("resource-flavors/", {"name": "f", "description": "bad \ud800 text"}, "description"),
        ("resource-flavors/", {"name": "f", "description": "a\u0000b"}, "description"),
        ("cohorts/", {"name": "c", "resource_groups": [{"flavors": ["\u0000"]}]}, None),
    ],
)
def test_text_no_field_may_hold_is_refused_with_the_field_named(
    admin_client: APIClient, url: str, body: dict[str, Any], field: str | None
) -> None:
    response = post_json(admin_client, f"{API}/{url}", json.dumps(body))
    found = errors(response)
    assert {rule for _, rule in found} == {"invalid-text"}
    if field is not None:
        assert found[0][0] == field
    else:
        assert found[0][0] == "resource_groups[0].flavors[0]"
    json.dumps(response.json()).encode("utf-8")  # the answer itself is valid text
    assert not ResourceFlavor.objects.exists()


def test_nul_in_a_filter_or_a_path_is_a_400_under_the_api(admin_client: APIClient) -> None:
    assert errors(admin_client.get(f"{API}/approvals/history/?team=%00")) == [
        ("team", "nul-character")
    ]
    assert errors(admin_client.get(f"{API}/jobs/?name=a%00b")) == [("name", "nul-character")]
    assert errors(admin_client.get(f"{API}/teams/%00/")) == [("path", "nul-character")]


@pytest.mark.parametrize(
    "path",
    ["/queues/%00/", "/teams/%00/", "/policy/cluster-queue/%00/", "/jobs/?team=%00"],
)
def test_nul_in_a_page_path_or_filter_is_a_400(users: dict[str, Any], path: str) -> None:
    browser = Client()
    browser.force_login(users["admin"])
    response = browser.get(path)
    assert response.status_code == 400
    assert b"NUL character" in response.content


def test_nul_in_a_form_field_is_a_400_and_nothing_changes(users: dict[str, Any]) -> None:
    flavor("h100")
    browser = Client()
    browser.force_login(users["admin"])
    response = browser.post(
        "/policy/resource-flavor/h100/", {"description": "x\x00y", "action": "apply"}
    )
    assert response.status_code == 400
    assert ResourceFlavor.objects.get(name="h100").description == ""


def test_an_oversized_body_is_a_json_413_without_an_error_in_the_log(
    admin_client: APIClient, caplog: Any
) -> None:
    body = json.dumps({"name": "x", "description": "a" * 3_000_000})
    response = post_json(admin_client, f"{API}/resource-flavors/", body)
    assert response.status_code == 413
    assert "at most" in response.json()["detail"]
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
    assert not ResourceFlavor.objects.exists()
