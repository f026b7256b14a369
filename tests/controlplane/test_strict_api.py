"""The API says no to what its schema does not allow, and its schema says what
it really answers: a number is not a token name, ``-0`` is not a quota, a form
is not JSON, a malformed filter, page or format is a 400 that names it, and the
schema declares the nulls, lists and errors the API sends."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import ApiToken
from queues.models import Cohort
from tests.factories import cluster_queue, cohort, flavor, gpu_groups

API = "/api/v1"


def refused(response: Any) -> list[tuple[str, str]]:
    assert response.status_code == 400, response.content
    # In the endpoint's own format when the format asked for is the error.
    body = (
        yaml.safe_load(response.content) if "yaml" in response["Content-Type"] else response.json()
    )
    return [(e["field"], e["rule"]) for e in body["errors"]]


def test_a_number_is_not_a_token_name(admin_client: APIClient) -> None:
    before = ApiToken.objects.count()
    response = admin_client.post(f"{API}/tokens/", {"name": 0}, format="json")
    assert refused(response) == [("name", "not-text")]
    assert ApiToken.objects.count() == before


@pytest.mark.parametrize("quota", ["-0", "-0.0", " -0", "-1"])
def test_a_quota_written_negative_is_refused(admin_client: APIClient, quota: str) -> None:
    flavor("h100")
    body = {"name": "org", "resource_groups": gpu_groups("h100", quota)}
    response = admin_client.post(f"{API}/cohorts/", body, format="json")
    assert "non-negative" in {rule for _, rule in refused(response)}, response.json()
    assert not Cohort.objects.exists()


def test_a_form_or_multipart_body_is_not_read_as_json(admin_client: APIClient) -> None:
    for kind in ("multipart", None):  # None: form-urlencoded
        if kind:
            response = admin_client.post(f"{API}/cohorts/", {"name": "org"}, format=kind)
        else:
            response = admin_client.generic(
                "POST", f"{API}/cohorts/", "name=org", "application/x-www-form-urlencoded"
            )
        assert response.status_code == 415, response.content
    assert not Cohort.objects.exists()


@pytest.mark.parametrize(
    ("query", "field", "rule"),
    [
        ("cluster-queues/?shared=maybe", "shared", "boolean"),
        ("cluster-queues/?shared=0.42", "shared", "boolean"),
        ("cluster-queues/?shared=FALSE", "shared", "boolean"),
        ("cohorts/?root=", "root", "empty"),
        ("priority-classes/?value_min=1.5", "value_min", "integer"),
        ("jobs/?kind=", "kind", "empty"),
        ("jobs/?kind=Job&kind=JobSet", "kind", "repeated"),
        ("jobs/?page_size=0", "page_size", "invalid"),
        ("jobs/?page_size=501", "page_size", "invalid"),
        ("jobs/?page_size=-3", "page_size", "invalid"),
        ("jobs/?page_size=10&page_size=20", "page_size", "invalid"),
        ("jobs/?page=abc", "page", "invalid"),
        ("jobs/queues/?all=0.42", "all", "invalid"),
        ("jobs/queues/?all=yes", "all", "invalid"),
        ("policy/manifests/?format=bogus", "format", "invalid"),
        ("policy/manifests/?format=", "format", "invalid"),
        ("approvals/history/?until=", "until", "empty"),
        ("approvals/history/?team=a&team=b", "team", "repeated"),
        ("approvals/history/?format=csv&page=-1", "page", "invalid"),
    ],
)
def test_a_malformed_query_parameter_is_a_400_naming_it(
    admin_client: APIClient, query: str, field: str, rule: str
) -> None:
    assert refused(admin_client.get(f"{API}/{query}")) == [(field, rule)]


def test_well_formed_queries_still_filter(admin_client: APIClient) -> None:
    flavor("h100")
    cohort("org")
    cluster_queue("shared-q", cohort="org", resource_groups=gpu_groups("h100", "4"))
    shared = admin_client.get(f"{API}/cluster-queues/?shared=true&page_size=500&page=1")
    assert [q["name"] for q in shared.json()["results"]] == ["shared-q"]
    assert admin_client.get(f"{API}/cluster-queues/?shared=false").json()["count"] == 0
    assert admin_client.get(f"{API}/jobs/queues/?all=true").status_code == 200
    assert admin_client.get(f"{API}/jobs/?page=2").status_code == 404  # past the last page


def schema(users: dict[str, Any]) -> dict[str, Any]:
    browser = Client()
    browser.force_login(users["admin"])
    response = browser.get("/api/schema/?format=json")
    assert response.status_code == 200
    return dict(response.json())


def test_the_schema_declares_what_the_api_answers(users: dict[str, Any]) -> None:
    found = schema(users)
    components = found["components"]["schemas"]
    approval = components["Approval"]["properties"]
    assert approval["requester"].get("nullable") and approval["decided_by"].get("nullable")
    assert components["ApprovalEvent"]["properties"]["actor"].get("nullable")
    assert components["Job"]["properties"]["wait_seconds"].get("nullable")
    events = found["paths"]["/api/v1/jobs/{id}/events/"]["get"]["responses"]["200"]
    assert events["content"]["application/json"]["schema"]["type"] == "array"
    assert "202" in found["paths"]["/api/v1/jobs/{id}/"]["delete"]["responses"]  # cancelling
    manifests = found["paths"]["/api/v1/policy/manifests/"]["get"]["responses"]["200"]
    assert manifests["content"]["application/json"]["schema"]["type"] == "array"
    cohorts = found["paths"]["/api/v1/cohorts/{name}/"]
    assert {"400", "401", "403", "404", "409", "412", "415"} <= set(cohorts["put"]["responses"])
    assert set(found["paths"]["/api/v1/cohorts/"]["post"]["requestBody"]["content"]) == {
        "application/json"
    }
