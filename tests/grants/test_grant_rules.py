"""Bad input is refused naming the field and the rule, storing nothing; who
may ask, see, decide and end; a loan that leaves its lender below what it
runs names the workloads and needs an acknowledgement."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from cluster.models import WorkloadRecord, WorkloadState
from grants.models import QuotaGrant
from queues import services
from queues.models import ClusterQueue, PolicyChange
from tests.factories import gpu_groups, token_client, user
from tests.grants.conftest import ask
from tests.grants.test_grant_lifecycle import nominal
from tests.jobs.conftest import Org

GPU = "nvidia.com/gpu"
LATER = timedelta(days=3)


def refused(org: Org, **overrides: Any) -> list[tuple[str, str]]:
    answer = org.alice.post("/api/v1/quota-grants/", ask(**overrides), format="json")
    assert answer.status_code == 400, answer.content
    assert not QuotaGrant.objects.exists()
    return [(e["field"], e["rule"]) for e in answer.json()["errors"]]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"cluster_queue": ""}, ("cluster_queue", "required")),
        ({"cluster_queue": "nope"}, ("cluster_queue", "unknown-reference")),
        ({"cluster_queue": "urgent"}, ("cluster_queue", "team-queue-required")),
        ({"flavor": ""}, ("flavor", "required")),
        ({"flavor": "h100-spot"}, ("flavor", "no-quota")),
        ({"amount": ""}, ("amount", "required")),
        ({"amount": "0"}, ("amount", "positive")),
        ({"amount": "1.5"}, ("amount", "quantity")),
        ({"amount": "lots"}, ("amount", "quantity")),
        ({"ends_at": "friday"}, ("ends_at", "datetime")),
        ({"ends_at": "2026-13-01T00:00:00Z"}, ("ends_at", "datetime")),
        ({"ends_at": "2020-01-01T00:00:00Z"}, ("ends_at", "in-the-future")),
        ({"ends_at": "2999-01-01T00:00:00Z"}, ("ends_at", "max-window")),
        ({"justification": "  "}, ("justification", "required")),
        ({"justification": "x" * 4001}, ("justification", "max-length")),
        ({"kind": "forever"}, ("kind", "invalid_choice")),
        ({"lender": "serving"}, ("lender", "only-for-loans")),
        ({"kind": "loan"}, ("lender", "required")),
        ({"kind": "loan", "lender": "nope"}, ("lender", "unknown-reference")),
        ({"kind": "loan", "lender": "research"}, ("lender", "not-self")),
        ({"kind": "loan", "lender": "serving", "amount": "17"}, ("amount", "exceeds-lender")),
        ({"kind": "loan", "lender": "research-eval"}, ("amount", "exceeds-lender")),
        ({"kind": "borrowing", "cluster_queue": "research-dev"}, ("kind", "no-limit")),
        ({"surprise": 1}, ("surprise", "unknown-field")),
    ],
)
def test_each_rule_is_named_and_nothing_is_stored(
    org: Org, overrides: dict[str, Any], expected: tuple[str, str]
) -> None:
    assert expected in refused(org, **overrides)


def test_a_borrowing_grant_needs_a_cohort(org: Org) -> None:
    services.cluster_queues.create(
        actor=None,
        data={
            "name": "research-solo",
            "team": "research",
            "resource_groups": gpu_groups("h100", "4"),
        },
    )
    assert ("kind", "needs-cohort") in refused(org, kind="borrowing", cluster_queue="research-solo")


def test_who_may_ask_see_decide_and_end(org: Org, carol_client: Any) -> None:
    asked = org.bob.post("/api/v1/quota-grants/", ask(), format="json")
    assert asked.status_code == 403 and asked.json()["rule"] == "not-a-member"
    grant = org.alice.post("/api/v1/quota-grants/", ask(), format="json").json()
    url = f"/api/v1/quota-grants/{grant['id']}"
    assert org.bob.get(f"{url}/").status_code == 404  # another team's, hidden
    assert org.bob.post(f"{url}/end/", {}, format="json").status_code == 404
    assert [g["id"] for g in org.bob.get("/api/v1/quota-grants/").json()["results"]] == []
    own = org.alice.post(f"{url}/approve/", {}, format="json")
    assert own.status_code == 403 and own.json()["rule"] == "requester-cannot-decide"
    team_approver = user("dana")
    services.set_membership(
        actor=None, team=org.users["alice"].team_memberships.first().team,
        username="dana", role="approver", present=True,
    )  # fmt: skip
    theirs = token_client(team_approver).post(f"{url}/approve/", {}, format="json")
    assert theirs.status_code == 403 and theirs.json()["rule"] == "not-an-approver"
    no_reason = carol_client.post(f"{url}/reject/", {"reason": " "}, format="json")
    assert no_reason.status_code == 400
    assert no_reason.json()["errors"][0] == {
        "field": "reason", "rule": "required", "message": "a reason is required to reject"
    }  # fmt: skip
    rejected = carol_client.post(f"{url}/reject/", {"reason": "not this week"}, format="json")
    assert rejected.status_code == 200 and rejected.json()["state"] == "rejected"
    late = org.admin.post(f"{url}/approve/", {}, format="json")
    assert late.status_code == 409 and "decided by carol" in late.json()["detail"]
    assert nominal("research") == 16


def serving_runs(name: str, gpus: int, priority: int, minutes_ago: int) -> None:
    now = timezone.now()
    WorkloadRecord.objects.create(
        uid=f"uid-{name}", namespace="serving", name=name, cluster_queue="serving",
        state=WorkloadState.ADMITTED, priority=priority,
        created_at=now - timedelta(minutes=minutes_ago + 1),
        admitted_at=now - timedelta(minutes=minutes_ago),
        pod_sets=[{"name": "main", "count": 1, "requests": {GPU: gpus}}],
        flavors={"main": {GPU: "h100"}},
    )  # fmt: skip


def test_a_loan_below_what_the_lender_runs_names_victims_and_needs_acknowledging(
    org: Org, carol_client: Any
) -> None:
    serving_runs("old-low", 4, 10, 60)
    serving_runs("new-low", 4, 10, 5)
    serving_runs("high", 8, 1000, 30)
    asked = org.alice.post(
        "/api/v1/quota-grants/", ask(kind="loan", lender="serving", amount="4"), format="json"
    )
    assert asked.status_code == 201, asked.content
    victims = asked.json()["impact"]["preempts"]
    # Lowest priority first, most recently admitted first: 4 GPUs are enough.
    assert [(v["workload"], v["amount"]) for v in victims] == [("serving/new-low", "4")]
    assert "would be over its quota" in asked.json()["impact"]["summary"]
    url = f"/api/v1/quota-grants/{asked.json()['id']}/approve/"
    before = PolicyChange.objects.count()
    unacknowledged = carol_client.post(url, {}, format="json")
    assert unacknowledged.status_code == 400
    error = unacknowledged.json()["errors"][0]
    assert (error["field"], error["rule"]) == ("acknowledge_preemption", "required")
    assert "serving/new-low" in error["message"]
    assert PolicyChange.objects.count() == before and nominal("serving") == 16
    approved = carol_client.post(url, {"acknowledge_preemption": True}, format="json")
    assert approved.status_code == 200 and approved.json()["acknowledged_preemption"] is True
    assert (nominal("research"), nominal("serving")) == (20, 12)


def test_a_loan_within_what_the_lender_leaves_free_needs_no_acknowledgement(
    org: Org, carol_client: Any
) -> None:
    serving_runs("small", 4, 10, 5)
    asked = org.alice.post(
        "/api/v1/quota-grants/", ask(kind="loan", lender="serving", amount="8"), format="json"
    ).json()
    assert asked["impact"]["preempts"] == []
    approved = carol_client.post(f"/api/v1/quota-grants/{asked['id']}/approve/", {}, format="json")
    assert approved.status_code == 200, approved.content


def test_the_same_approval_sent_again_with_its_key_is_answered_as_the_first(
    org: Org, carol_client: Any
) -> None:
    grant = org.alice.post("/api/v1/quota-grants/", ask(), format="json").json()
    url = f"/api/v1/quota-grants/{grant['id']}/approve/"
    first = carol_client.post(url, {}, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    again = carol_client.post(url, {}, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    other = carol_client.post(url, {}, format="json", HTTP_IDEMPOTENCY_KEY="k-2")
    assert (first.status_code, again.status_code, other.status_code) == (200, 200, 409)
    assert nominal("research") == 32


def test_the_end_must_be_within_the_window_from_now(org: Org) -> None:
    ok = org.alice.post(
        "/api/v1/quota-grants/",
        ask(ends_at=(timezone.now() + timedelta(days=30)).isoformat()),
        format="json",
    )
    assert ok.status_code == 201


def test_a_loan_the_lender_can_no_longer_give_is_refused_at_approval(
    org: Org, carol_client: Any
) -> None:
    asked = org.alice.post(
        "/api/v1/quota-grants/", ask(kind="loan", lender="serving", amount="8"), format="json"
    ).json()
    serving = ClusterQueue.objects.get(name="serving")
    services.cluster_queues.update(
        actor=None, obj=serving, data={"resource_groups": gpu_groups("h100", "4")}
    )
    answer = carol_client.post(f"/api/v1/quota-grants/{asked['id']}/approve/", {}, format="json")
    assert answer.status_code == 400, answer.content
    error = answer.json()["errors"][0]
    assert (error["field"], error["rule"]) == ("amount", "exceeds-lender")
    assert QuotaGrant.objects.get(pk=asked["id"]).state == "pending"  # rolled back whole
    assert (nominal("research"), nominal("serving")) == (16, 4)
