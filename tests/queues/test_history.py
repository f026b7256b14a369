"""Every policy change is recorded with who, when, before and after; the history
is readable through the API with privacy for team membership."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from queues.models import PolicyChange
from tests.factories import GPU, flavor, gpu_groups

pytestmark = pytest.mark.django_db


def history(client: APIClient, **params: Any) -> list[dict[str, Any]]:
    response = client.get("/api/v1/policy/history/", params)
    assert response.status_code == 200, response.content
    return list(response.json()["results"])


def test_create_update_delete_are_recorded_with_actor_and_diff(
    clients: dict[str, APIClient], users: dict[str, Any]
) -> None:
    admin = clients["admin"]
    flavor("h100")
    created = admin.post(
        "/api/v1/cluster-queues/",
        {"name": "research", "resource_groups": gpu_groups("h100", "8")},
        format="json",
    )
    assert created.status_code == 201, created.content
    patched = admin.patch(
        "/api/v1/cluster-queues/research/",
        {"resource_groups": gpu_groups("h100", "16"), "description": "bigger"},
        format="json",
    )
    assert patched.status_code == 200, patched.content
    assert admin.delete("/api/v1/cluster-queues/research/").status_code == 204

    entries = history(admin, kind="cluster-queue", object_name="research")
    assert [e["action"] for e in entries] == ["deleted", "updated", "created"]
    assert {e["actor"] for e in entries} == {"admin"}
    deleted, updated, created_entry = entries
    assert created_entry["before"] is None
    assert created_entry["after"]["resource_groups"][0]["flavors"][0]["resources"] == [
        {"name": GPU, "nominal_quota": "8"}
    ]
    assert updated["changed_fields"] == ["description", "resource_groups"]
    assert (
        updated["before"]["resource_groups"][0]["flavors"][0]["resources"][0]["nominal_quota"]
        == "8"
    )
    assert (
        updated["after"]["resource_groups"][0]["flavors"][0]["resources"][0]["nominal_quota"]
        == "16"
    )
    assert deleted["after"] is None and deleted["before"]["description"] == "bigger"
    # Generated LocalQueues came and went with the queue, and say so.
    local = history(admin, kind="local-queue")
    assert {(e["object_name"], e["action"]) for e in local} == {
        ("alpha/research", "created"),
        ("beta/research", "created"),
        ("alpha/research", "deleted"),
        ("beta/research", "deleted"),
    }


def test_update_that_changes_nothing_records_nothing_and_keeps_revision(
    admin_client: APIClient,
) -> None:
    flavor("h100", node_labels={"gpu": "h100"})
    before = PolicyChange.objects.count()
    response = admin_client.patch(
        "/api/v1/resource-flavors/h100/", {"node_labels": {"gpu": "h100"}}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["revision"] == 1
    assert PolicyChange.objects.count() == before


def test_revision_counts_changes_and_is_the_etag(admin_client: APIClient) -> None:
    flavor("h100")
    response = admin_client.patch(
        "/api/v1/resource-flavors/h100/", {"description": "x"}, format="json"
    )
    assert response.json()["revision"] == 2
    assert response["ETag"] == '"2"'
    assert admin_client.get("/api/v1/resource-flavors/h100/")["ETag"] == '"2"'


def test_history_filters(admin_client: APIClient) -> None:
    flavor("a100")
    flavor("h100")
    names = [e["object_name"] for e in history(admin_client, kind="resource-flavor")]
    assert names == ["h100", "a100"]  # newest first
    assert [e["object_name"] for e in history(admin_client, object_name="a100")] == ["a100"]
    assert history(admin_client, actor="nobody") == []
    assert history(admin_client, kind="resource-flavor", since="2999-01-01T00:00:00Z") == []


def test_membership_history_is_private_to_the_team(clients: dict[str, APIClient]) -> None:
    # Fixture set-up recorded membership changes for alpha and beta.
    def membership_teams(role: str) -> set[str]:
        return {e["object_name"] for e in history(clients[role], kind="team-membership")}

    assert membership_teams("admin") == {"alpha", "beta"}
    assert membership_teams("member_a") == {"alpha"}
    assert membership_teams("member_b") == {"beta"}
    assert membership_teams("global_approver") == set()
    # Public policy history is visible to every signed-in user.
    assert {e["object_name"] for e in history(clients["member_b"], kind="team")} == {
        "alpha",
        "beta",
    }


def test_membership_change_records_before_and_after(admin_client: APIClient) -> None:
    response = admin_client.post(
        "/api/v1/teams/alpha/members/", {"username": "member-b", "role": "member"}, format="json"
    )
    assert response.status_code == 201
    latest = history(admin_client, kind="team-membership", object_name="alpha")[0]
    assert latest["before"]["members"] == ["member-a"]
    assert latest["after"]["members"] == ["member-a", "member-b"]
    assert latest["actor"] == "admin"
    # Adding the same member again changes nothing and records nothing.
    again = admin_client.post(
        "/api/v1/teams/alpha/members/", {"username": "member-b", "role": "member"}, format="json"
    )
    assert again.status_code == 200
    assert (
        history(admin_client, kind="team-membership", object_name="alpha")[0]["id"]
        == (latest["id"])
    )


def test_refused_change_records_no_history(admin_client: APIClient) -> None:
    before = PolicyChange.objects.count()
    response = admin_client.post("/api/v1/cohorts/", {"name": "Not Valid"}, format="json")
    assert response.status_code == 400
    assert PolicyChange.objects.count() == before


def test_the_queue_class_api_writes_every_field_the_model_declares() -> None:
    """One declaration of a queue class's fields (the model): the defaults,
    snapshots, admin and filters derive from it, and the API must offer each."""
    from queues.api.serializers import QueueClassSerializer
    from queues.models import QueueClass
    from queues.services.classes import QUEUE_CLASS_DEFAULTS

    declared = {f.name for f in QueueClass.policy_fields()}
    offered = {name for name, field in QueueClassSerializer().fields.items() if not field.read_only}
    assert declared == set(QUEUE_CLASS_DEFAULTS) == offered - {"revision"}
