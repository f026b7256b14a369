"""The API's HTTP contract at its edges: PUT versus PATCH, queue-class defaults,
malformed bodies and URLs, and JSON answers for paths that do not exist."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from queues import services
from queues.models import PolicyChange, Team, WorkloadPriorityClass
from tests.factories import cluster_queue, flavor, gpu_groups

pytestmark = pytest.mark.django_db


def test_put_replaces_and_patch_merges(admin_client: APIClient) -> None:
    services.priority_classes.create(
        actor=None, data={"name": "p", "value": 5, "description": "kept by PATCH"}
    )
    patched = admin_client.patch("/api/v1/priority-classes/p/", {"value": 6}, format="json")
    assert patched.json()["description"] == "kept by PATCH"
    incomplete = admin_client.put("/api/v1/priority-classes/p/", {"value": 7}, format="json")
    assert incomplete.status_code == 400
    assert {e["field"] for e in incomplete.json()["errors"]} == {"name"}
    replaced = admin_client.put(
        "/api/v1/priority-classes/p/", {"name": "p", "value": 7}, format="json"
    )
    assert replaced.status_code == 200, replaced.content
    assert replaced.json()["description"] == ""  # left out of the PUT: back to its default
    assert WorkloadPriorityClass.objects.get(name="p").value == 7


def test_put_of_what_get_returned_changes_nothing(admin_client: APIClient) -> None:
    flavor("h100")
    cluster_queue("q", queue_class="training-large", resource_groups=gpu_groups("h100"))
    body = admin_client.get("/api/v1/cluster-queues/q/").json()
    history = PolicyChange.objects.count()
    response = admin_client.put("/api/v1/cluster-queues/q/", body, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["revision"] == body["revision"]
    assert PolicyChange.objects.count() == history


def test_changing_queue_class_brings_its_defaults_unless_set(admin_client: APIClient) -> None:
    flavor("h100")
    cluster_queue("q", queue_class="eval-batch", resource_groups=gpu_groups("h100"))
    moved = admin_client.patch(
        "/api/v1/cluster-queues/q/", {"queue_class": "training-large"}, format="json"
    ).json()
    # eval-batch: BestEffortFIFO / reclaim LowerPriority -> training-large: StrictFIFO / Any
    assert (moved["queueing_strategy"], moved["reclaim_within_cohort"]) == ("StrictFIFO", "Any")
    chosen = admin_client.patch(
        "/api/v1/cluster-queues/q/",
        {"queue_class": "interactive-dev", "queueing_strategy": "StrictFIFO"},
        format="json",
    ).json()
    assert chosen["queueing_strategy"] == "StrictFIFO"  # set in the same request: kept
    # A field the admin changed away from the class default stays through a move.
    admin_client.patch(
        "/api/v1/cluster-queues/q/", {"within_cluster_queue": "Never"}, format="json"
    )
    again = admin_client.patch(
        "/api/v1/cluster-queues/q/", {"queue_class": "training-large"}, format="json"
    ).json()
    assert again["within_cluster_queue"] == "Never"


def test_reused_team_slug_does_not_reveal_the_old_teams_members(
    clients: dict[str, APIClient], users: dict[str, Any]
) -> None:
    old = services.teams.create(actor=None, data={"slug": "tmp", "name": "Tmp"})
    services.set_membership(actor=None, team=old, username="member-b", role="member", present=True)
    services.teams.delete(actor=None, obj=old)
    new = services.teams.create(
        actor=None, data={"slug": "tmp", "name": "Tmp again", "namespaces": ["tmp2"]}
    )
    services.set_membership(actor=None, team=new, username="member-a", role="member", present=True)
    seen = (
        clients["member_a"]
        .get("/api/v1/policy/history/", {"kind": "team-membership", "object_name": "tmp"})
        .json()["results"]
    )
    assert len(seen) == 1
    assert "member-b" not in str(seen)
    assert Team.objects.get(slug="tmp").pk == new.pk


@pytest.mark.parametrize("path", ["/api/v1/local-queues/x/", "/api/v1/tokens/abc/"])
def test_odd_urls_are_404_not_500(clients: dict[str, APIClient], path: str) -> None:
    response = clients["member_a"].get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"


@pytest.mark.parametrize("path", ["/api/v1/cluster-queues/a%00b/", "/api/v1/teams/a%00/members/"])
def test_a_nul_in_an_api_path_is_a_400_naming_the_path(
    clients: dict[str, APIClient], path: str
) -> None:
    response = clients["member_a"].get(path)
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "path"


def test_unknown_api_path_answers_json(clients: dict[str, APIClient]) -> None:
    response = clients["member_a"].get("/api/v1/no-such-thing/")
    assert response.status_code == 404
    assert "see /api/schema/" in response.json()["detail"]


@pytest.mark.parametrize("body", ['{"name": "x",', "[" * 100_000, '"just a string"'])
def test_malformed_bodies_answer_in_the_error_format(admin_client: APIClient, body: str) -> None:
    before = WorkloadPriorityClass.objects.count()
    response = admin_client.generic(
        "POST", "/api/v1/priority-classes/", body, content_type="application/json"
    )
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert errors and all(set(e) == {"field", "rule", "message"} for e in errors)
    assert WorkloadPriorityClass.objects.count() == before


def test_members_endpoint_is_described_as_it_answers(clients: dict[str, APIClient]) -> None:
    schema = clients["member_a"].get("/api/schema/", HTTP_ACCEPT="application/json").json()
    members = schema["paths"]["/api/v1/teams/{slug}/members/"]["get"]
    ref = members["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert ref.endswith("/TeamMembers")
    shown = clients["member_a"].get("/api/v1/teams/alpha/members/").json()
    assert set(shown) == {"team", "members"}
