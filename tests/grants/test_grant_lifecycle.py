"""A grant asked for, approved (applied with history), ended (reverted by
delta, history naming the grant), through the API as its users call it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from grants import lifecycle
from grants.models import GrantState, QuotaGrant
from grants.policy import BORROWING, NOMINAL, current
from grants.services import request_grant
from queues import services, snapshots
from queues.models import ClusterQueue, PolicyChange
from queues.reconcile import desired_objects
from tests.grants.conftest import ask
from tests.jobs.conftest import Org

GPU = "nvidia.com/gpu"


def nominal(name: str) -> int | None:
    return current(ClusterQueue.objects.get(name=name), "h100", GPU, NOMINAL)


def rendered_nominal(name: str) -> str:
    """What reconcile would write to the cluster for the queue's h100 GPUs."""
    for obj in desired_objects():
        if obj["kind"] == "ClusterQueue" and obj["metadata"]["name"] == name:
            for group in obj["spec"]["resourceGroups"]:
                for flavor in group["flavors"]:
                    if flavor["name"] == "h100":
                        for resource in flavor["resources"]:
                            if resource["name"] == GPU:
                                return str(resource["nominalQuota"])
    raise AssertionError(f"{name} not rendered")


def test_approved_grant_is_applied_and_its_end_reverts_it_with_history(
    org: Org, carol: Any, carol_client: Any
) -> None:
    created = org.alice.post("/api/v1/quota-grants/", ask(), format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["state"] == "pending" and body["amount"] == "16"
    assert body["team"] == "research" and body["requester"] == "alice"
    assert body["can_decide"] is False  # alice asked
    assert body["impact"]["summary"].startswith("research's nominal quota rises by 16 h100")
    assert {row["cluster_queue"] for row in body["impact"]["shrinks"]} >= {"serving"}
    assert nominal("research") == 16
    run = body["whatif_run"]
    assert run is not None or body["impact"]["whatif_error"]

    approved = carol_client.post(
        f"/api/v1/quota-grants/{body['id']}/approve/", {"comment": "ok"}, format="json"
    )
    assert approved.status_code == 200, approved.content
    assert approved.json()["state"] == "active"
    assert approved.json()["applied"] == [
        {"cluster_queue": "research", "flavor": "h100", "resource": GPU,
         "field": NOMINAL, "delta": 16}
    ]  # fmt: skip
    assert nominal("research") == 32
    assert rendered_nominal("research") == "32"
    change = PolicyChange.objects.filter(object_name="research").first()
    assert change is not None and change.actor_username == "carol"
    assert change.note.startswith(f"quota grant #{body['id']} approved by carol")

    grant = QuotaGrant.objects.get(pk=body["id"])
    assert lifecycle.revert_ended(grant.ends_at - timedelta(seconds=1)) == {
        "ended": 0,
        "expired": 0,
    }
    assert nominal("research") == 32  # not before its end
    assert lifecycle.revert_ended(grant.ends_at) == {"ended": 1, "expired": 0}
    grant.refresh_from_db()
    assert grant.state == GrantState.ENDED and "passed" in grant.end_reason
    assert nominal("research") == 16
    assert rendered_nominal("research") == "16"
    revert = PolicyChange.objects.filter(object_name="research").first()
    assert revert is not None and revert.actor_username == "system"
    assert revert.note.startswith(f"quota grant #{grant.pk} ended by Berth")
    assert lifecycle.revert_ended(grant.ends_at + timedelta(hours=1))["ended"] == 0  # once


def test_revert_by_delta_keeps_an_admins_edit_made_meanwhile(org: Org, carol: Any) -> None:
    grant = grant_approved(org, carol)
    assert nominal("research") == 32
    queue = ClusterQueue.objects.get(name="research")
    services.cluster_queues.update(
        actor=org.users["admin"],
        obj=queue,
        data={"resource_groups": groups_with("research", "40")},
    )
    lifecycle.end(org.users["alice"], grant.pk, reason="release shipped early")
    assert nominal("research") == 24  # the admin's +8 survives
    grant.refresh_from_db()
    assert grant.end_reason == "release shipped early" and grant.ended_by == org.users["alice"]


def groups_with(name: str, value: str) -> list[dict[str, Any]]:
    groups = snapshots.cluster_queue(ClusterQueue.objects.get(name=name))["resource_groups"]
    for group in groups:
        for flavor in group["flavors"]:
            for resource in flavor["resources"]:
                if flavor["name"] == "h100" and resource["name"] == GPU:
                    resource["nominal_quota"] = value
    return groups  # type: ignore[no-any-return]


def grant_approved(org: Org, approver: Any, **overrides: Any) -> QuotaGrant:
    grant = request_grant(org.users["alice"], ask(**overrides))
    return lifecycle.approve(approver, grant.pk, comment="ok")


def test_borrowing_grant_raises_the_limit_and_its_end_restores_it(org: Org, carol: Any) -> None:
    queue = ClusterQueue.objects.get(name="research")
    assert current(queue, "h100", GPU, BORROWING) == 8
    grant = grant_approved(org, carol, kind="borrowing", amount="8")
    assert current(queue, "h100", GPU, BORROWING) == 16
    lifecycle.revert_ended(grant.ends_at)
    assert current(queue, "h100", GPU, BORROWING) == 8


def test_a_loan_moves_nominal_quota_and_back(org: Org, carol: Any) -> None:
    grant = grant_approved(org, carol, kind="loan", lender="serving", amount="4")
    assert (nominal("research"), nominal("serving")) == (20, 12)
    assert grant.impact["shrinks"][0]["cluster_queue"] == "serving"
    assert grant.impact["shrinks"][0]["lendable_after"] == "12"
    lifecycle.end(carol, grant.pk)
    assert (nominal("research"), nominal("serving")) == (16, 16)
    notes = set(PolicyChange.objects.filter(note__contains=f"#{grant.pk}").values_list(
        "object_name", flat=True
    ))  # fmt: skip
    assert notes == {"research", "serving"}


def test_ending_a_pending_grant_withdraws_it_and_changes_no_policy(org: Org) -> None:
    created = org.alice.post("/api/v1/quota-grants/", ask(), format="json").json()
    before = PolicyChange.objects.count()
    ended = org.alice.post(f"/api/v1/quota-grants/{created['id']}/end/", {}, format="json")
    assert ended.status_code == 200 and ended.json()["state"] == "ended"
    assert PolicyChange.objects.count() == before and nominal("research") == 16
    again = org.alice.post(f"/api/v1/quota-grants/{created['id']}/end/", {}, format="json")
    assert again.status_code == 409 and again.json()["rule"] == "already-decided"


def test_a_pending_grant_past_its_end_expires_and_cannot_be_approved(
    org: Org, carol_client: Any
) -> None:
    created = org.alice.post("/api/v1/quota-grants/", ask(), format="json").json()
    QuotaGrant.objects.filter(pk=created["id"]).update(ends_at=timezone.now())
    answer = carol_client.post(f"/api/v1/quota-grants/{created['id']}/approve/", {}, format="json")
    assert answer.status_code == 409 and "expired" in answer.json()["detail"]
    assert nominal("research") == 16


def test_a_revert_stops_at_zero_and_leaves_a_removed_limit_alone(org: Org, carol: Any) -> None:
    grant = grant_approved(org, carol)  # research 16 -> 32
    services.cluster_queues.update(
        actor=org.users["admin"],
        obj=ClusterQueue.objects.get(name="research"),
        data={"resource_groups": groups_with("research", "8")},
    )
    ended = lifecycle.end(carol, grant.pk)
    assert nominal("research") == 0
    [row] = ended.reverted
    assert (row["delta"], row["done"]) == (-16, -8) and "stops at zero" in row["note"]

    borrowing = grant_approved(org, carol, kind="borrowing", amount="8", cluster_queue="research")
    queue = ClusterQueue.objects.get(name="research")
    groups = snapshots.cluster_queue(queue)["resource_groups"]
    del groups[0]["flavors"][0]["resources"][0]["borrowing_limit"]  # no limit now
    admin = org.users["admin"]
    services.cluster_queues.update(actor=admin, obj=queue, data={"resource_groups": groups})
    ended = lifecycle.end(carol, borrowing.pk)
    assert ended.state == GrantState.ENDED
    [row] = ended.reverted
    assert row["done"] == 0 and row["note"].startswith("left alone:") and "no limit" in row["note"]
    assert current(queue, "h100", GPU, BORROWING) is None
