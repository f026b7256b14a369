"""The approvals API (``/api/v1/approvals/``) over HTTP with real tokens: who
sees and who decides a request (and that a refusal changes nothing), the
refused inputs, a second decision, the list's filters and ``can_decide``, and
the audit history as JSON and CSV."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from approvals.api import HistoryRowSerializer
from approvals.history import CSV_COLUMNS
from approvals.models import ApprovalAction, ApprovalEvent, ApprovalRequest, ApprovalState
from queues import services
from queues.models import Team
from tests.approvals.approval_support import approval_request, approvers
from tests.factories import token_client, user
from tests.jobs.conftest import Org

URL = "/api/v1/approvals/"


@pytest.fixture
def people(org: Org) -> dict[str, Any]:
    """org's users plus carol, dave, erin (approvers) and rita, another research
    member, so that a plain member can be tried on a request not their own."""
    found = dict(org.users) | approvers()
    found["rita"] = user("rita")
    services.set_membership(
        actor=None,
        team=Team.objects.get(slug="research"),
        username="rita",
        role="member",
        present=True,
    )
    return found


def as_user(people: dict[str, Any], name: str) -> APIClient:
    return token_client(people[name])


def unchanged(request: ApprovalRequest) -> None:
    request.refresh_from_db()
    assert request.state == ApprovalState.PENDING
    assert request.decided_by is None and request.decided_at is None and request.comment == ""
    assert not ApprovalEvent.objects.filter(request=request).exists()


# --- who decides -------------------------------------------------------------------

DECISIONS = [
    pytest.param("approve", {"comment": "ship it"}, ApprovalState.APPROVED, id="approve"),
    pytest.param("reject", {"reason": "not a blocker"}, ApprovalState.REJECTED, id="reject"),
]


@pytest.mark.parametrize(("verb", "body", "state"), DECISIONS)
@pytest.mark.parametrize(
    ("actor", "requester", "status", "rule"),
    [
        # A member follows the team's request, but only an approver decides it.
        pytest.param("rita", "alice", 403, "not-an-approver", id="team-member"),
        pytest.param("alice", "alice", 403, "requester-cannot-decide", id="requester-member"),
        pytest.param("bob", "alice", 404, None, id="other-team-member"),
        pytest.param("dave", "alice", 404, None, id="other-team-approver"),
        pytest.param("carol", "carol", 403, "requester-cannot-decide", id="requester-approver"),
        pytest.param("carol", "alice", 200, None, id="team-approver"),
        pytest.param("erin", "alice", 200, None, id="global-approver"),
        pytest.param("admin", "alice", 200, None, id="platform-admin"),
    ],
)
def test_who_may_decide(
    people: dict[str, Any],
    verb: str,
    body: dict[str, str],
    state: str,
    actor: str,
    requester: str,
    status: int,
    rule: str | None,
) -> None:
    request = approval_request(people[requester])
    response = as_user(people, actor).post(f"{URL}{request.pk}/{verb}/", body, format="json")
    assert response.status_code == status, response.content
    if status == 200:
        answer = response.json()
        assert answer["state"] == state and answer["decided_by"] == people[actor].username
        assert answer["can_decide"] is False
        assert answer["comment"] == next(iter(body.values()))
        request.refresh_from_db()
        assert request.state == state and request.decided_by == people[actor]
        [event] = ApprovalEvent.objects.filter(request=request)
        assert event.action == state and event.actor == people[actor]
        assert answer["events"] == [
            {
                "action": state,
                "actor": people[actor].username,
                "at": answer["events"][0]["at"],
                "message": next(iter(body.values())),
            }
        ]
        return
    if status == 403:
        assert response.json()["rule"] == rule
        assert response.json()["detail"]
    unchanged(request)


def test_a_request_one_may_not_see_is_not_found_whatever_the_verb(
    people: dict[str, Any],
) -> None:
    request = approval_request(people["alice"])
    bob = as_user(people, "bob")
    assert bob.get(f"{URL}{request.pk}/").status_code == 404
    assert bob.post(f"{URL}{request.pk}/reject/", {}, format="json").status_code == 404
    assert as_user(people, "carol").get(f"{URL}999999/").status_code == 404
    assert APIClient().get(f"{URL}{request.pk}/").status_code == 401
    unchanged(request)


def test_a_refused_decision_is_logged_as_an_access_denial(people: dict[str, Any]) -> None:
    from accounts.models import AccessDenial

    request = approval_request(people["alice"])
    as_user(people, "rita").post(f"{URL}{request.pk}/approve/", {}, format="json")
    denial = AccessDenial.objects.get()
    assert denial.username == "rita" and denial.detail.startswith("not-an-approver:")
    assert denial.path == f"{URL}{request.pk}/approve/"


# --- bad input ---------------------------------------------------------------------


@pytest.mark.parametrize("body", [{}, {"reason": ""}, {"reason": "   \n "}], ids=str)
def test_a_rejection_needs_a_reason(people: dict[str, Any], body: dict[str, str]) -> None:
    request = approval_request(people["alice"])
    response = as_user(people, "carol").post(f"{URL}{request.pk}/reject/", body, format="json")
    assert response.status_code == 400, response.content
    [error] = response.json()["errors"]
    assert (error["field"], error["rule"]) == ("reason", "required")
    unchanged(request)


@pytest.mark.parametrize(
    ("verb", "field"), [("approve", "comment"), ("reject", "reason")], ids=["approve", "reject"]
)
def test_a_comment_over_4000_characters_is_refused(
    people: dict[str, Any], verb: str, field: str
) -> None:
    request = approval_request(people["alice"])
    response = as_user(people, "erin").post(
        f"{URL}{request.pk}/{verb}/", {field: "x" * 4001}, format="json"
    )
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert (error["field"], error["rule"]) == (field, "max-length")
    assert "4001" in error["message"]
    unchanged(request)


def test_an_unknown_field_or_a_non_object_body_is_refused(people: dict[str, Any]) -> None:
    request = approval_request(people["alice"])
    carol = as_user(people, "carol")
    response = carol.post(f"{URL}{request.pk}/reject/", {"reson": "typo"}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "reson"
    assert response.json()["errors"][0]["rule"] == "unknown-field"
    response = carol.post(f"{URL}{request.pk}/approve/", "[1]", content_type="application/json")
    assert response.status_code == 400
    unchanged(request)


# --- once --------------------------------------------------------------------------


def test_a_second_decision_is_a_conflict_naming_the_first_decider(
    people: dict[str, Any],
) -> None:
    request = approval_request(people["alice"])
    first = as_user(people, "carol").post(
        f"{URL}{request.pk}/approve/", {"comment": "release blocker"}, format="json"
    )
    assert first.status_code == 200
    for verb, body in (("reject", {"reason": "too late"}), ("approve", {})):
        second = as_user(people, "erin").post(f"{URL}{request.pk}/{verb}/", body, format="json")
        assert second.status_code == 409, second.content
        answer = second.json()
        assert answer["rule"] == "already-decided"
        assert "already approved by carol" in answer["detail"]
        assert "release blocker" in answer["detail"]
        assert answer["references"]["decided_by"] == ["carol"]
    request.refresh_from_db()
    assert request.state == ApprovalState.APPROVED and request.decided_by == people["carol"]
    assert ApprovalEvent.objects.filter(request=request).count() == 1


def test_an_expired_request_cannot_be_decided(people: dict[str, Any]) -> None:
    request = approval_request(
        people["alice"], state=ApprovalState.EXPIRED, decided_at=timezone.now()
    )
    response = as_user(people, "carol").post(f"{URL}{request.pk}/approve/", {}, format="json")
    assert response.status_code == 409
    assert "already expired" in response.json()["detail"]


def test_the_decision_is_written_to_the_workload_after_commit(
    people: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    # Celery is eager in tests: the apply task runs on commit, against the
    # simulated cluster, which has no such Workload: the request is marked applied.
    request = approval_request(people["alice"])
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = as_user(people, "carol").post(f"{URL}{request.pk}/approve/", {}, format="json")
    assert response.status_code == 200 and len(callbacks) == 1
    request.refresh_from_db()
    assert request.applied_at is not None
    actions = list(ApprovalEvent.objects.filter(request=request).values_list("action", "message"))
    assert actions == [
        (ApprovalAction.APPROVED, ""),
        (ApprovalAction.APPLIED, "the Workload is gone; nothing to write"),
    ]


# --- the list ----------------------------------------------------------------------


@pytest.fixture
def requests(people: dict[str, Any]) -> dict[str, ApprovalRequest]:
    """mine: alice's, pending; own: carol's own; done: approved by erin;
    research: alice's in research's own queue; serving: bob's."""
    now = timezone.now()
    serving = Team.objects.get(slug="serving")
    made = {
        "done": approval_request(
            people["alice"],
            state=ApprovalState.APPROVED,
            decided_by=people["erin"],
            decided_at=now,
            comment="fine",
            created_at=now - timedelta(hours=3),
        ),
        "own": approval_request(people["carol"], created_at=now - timedelta(hours=2)),
        "research": approval_request(
            people["alice"],
            cluster_queue="research",
            local_queue="research",
            created_at=now - timedelta(hours=1),
        ),
        "serving": approval_request(
            people["bob"], team=serving, namespace="serving", created_at=now - timedelta(minutes=30)
        ),
        "mine": approval_request(
            people["alice"],
            impact={
                "preempts": [{"workload": "serving/job-a", "gpus": 8, "gpu_hours_lost": 3.5}],
                "gpu_hours_lost": 3.5,
                "gpus_preempted": 8,
                "summary": "Preempts 1 workload",
            },
        ),
    }
    return made


def listed(client: APIClient, **query: str) -> list[dict[str, Any]]:
    response = client.get(URL, query)
    assert response.status_code == 200, response.content
    page = response.json()
    assert page["count"] == len(page["results"])
    return list(page["results"])


def ids(rows: list[dict[str, Any]], made: dict[str, ApprovalRequest]) -> list[str]:
    names = {r.pk: name for name, r in made.items()}
    return [names[row["id"]] for row in rows]


def test_the_list_shows_what_each_may_see_newest_first(
    people: dict[str, Any], requests: dict[str, ApprovalRequest]
) -> None:
    research = ["mine", "research", "own", "done"]
    assert ids(listed(as_user(people, "carol")), requests) == research
    assert ids(listed(as_user(people, "alice")), requests) == research
    assert ids(listed(as_user(people, "bob")), requests) == ["serving"]
    assert ids(listed(as_user(people, "dave")), requests) == ["serving"]
    everything = ["mine", "serving", "research", "own", "done"]
    assert ids(listed(as_user(people, "erin")), requests) == everything
    assert ids(listed(as_user(people, "admin")), requests) == everything


def test_list_items_carry_the_request_and_whether_you_can_decide_it(
    people: dict[str, Any], requests: dict[str, ApprovalRequest]
) -> None:
    rows = {row["id"]: row for row in listed(as_user(people, "carol"))}
    can = {name: rows[r.pk]["can_decide"] for name, r in requests.items() if r.pk in rows}
    assert can == {"mine": True, "research": True, "own": False, "done": False}
    assert not any(row["can_decide"] for row in listed(as_user(people, "alice")))
    mine = rows[requests["mine"].pk]
    assert mine["workload"] == "research/job-release-fix"
    assert (mine["namespace"], mine["cluster_queue"], mine["local_queue"]) == (
        "research",
        "urgent",
        "urgent",
    )
    assert (mine["team"], mine["requester"], mine["gpus"]) == ("research", "alice", 8)
    assert mine["requested"] == {"nvidia.com/gpu": 8}
    assert (mine["priority"], mine["priority_class"]) == (100000, "train-high")
    assert mine["impact"]["gpu_hours_lost"] == 3.5 and len(mine["impact"]["preempts"]) == 1
    assert mine["state"] == "pending" and mine["attempt"] == 1
    assert mine["decided_by"] is None and mine["reapproval_of"] is None and mine["job"] is None
    assert set(mine) >= {
        "justification", "created_at", "expires_at", "decided_at", "comment", "applied_at",
    }  # fmt: skip
    done = rows[requests["done"].pk]
    assert (done["decided_by"], done["comment"]) == ("erin", "fine")


def test_the_list_filters(people: dict[str, Any], requests: dict[str, ApprovalRequest]) -> None:
    carol, erin = as_user(people, "carol"), as_user(people, "erin")
    assert ids(listed(carol, decidable="true"), requests) == ["mine", "research"]
    assert ids(listed(carol, decidable="false"), requests) == ["own", "done"]
    assert ids(listed(erin, decidable="true"), requests) == ["mine", "serving", "research", "own"]
    assert ids(listed(as_user(people, "alice"), decidable="true"), requests) == []
    assert ids(listed(erin, state="approved"), requests) == ["done"]
    assert ids(listed(erin, team="serving"), requests) == ["serving"]
    assert ids(listed(erin, cluster_queue="research"), requests) == ["research"]
    assert ids(listed(carol, state="pending", cluster_queue="urgent"), requests) == ["mine", "own"]
    response = erin.get(URL, {"state": "maybe"})
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "state"


def test_the_list_is_paginated(
    people: dict[str, Any], requests: dict[str, ApprovalRequest]
) -> None:
    page = as_user(people, "erin").get(URL, {"page_size": 2}).json()
    assert page["count"] == 5 and len(page["results"]) == 2 and page["next"]


def test_the_detail_has_the_audit_trail(people: dict[str, Any]) -> None:
    request = approval_request(people["alice"])
    as_user(people, "carol").post(f"{URL}{request.pk}/reject/", {"reason": "no"}, format="json")
    detail = as_user(people, "alice").get(f"{URL}{request.pk}/").json()
    assert detail["state"] == "rejected" and detail["can_decide"] is False
    assert [(e["action"], e["actor"], e["message"]) for e in detail["events"]] == [
        ("rejected", "carol", "no")
    ]


# --- history -----------------------------------------------------------------------


@pytest.fixture
def decided(people: dict[str, Any]) -> dict[str, ApprovalRequest]:
    """carol approves alice's research request; dave rejects bob's serving one
    (with a reason a spreadsheet would take for a formula)."""
    research = approval_request(people["alice"])
    serving = approval_request(
        people["bob"], team=Team.objects.get(slug="serving"), namespace="serving"
    )
    carol, dave = as_user(people, "carol"), as_user(people, "dave")
    approve = carol.post(f"{URL}{research.pk}/approve/", {"comment": "go"}, format="json")
    reject = dave.post(f"{URL}{serving.pk}/reject/", {"reason": "=1+1 not now"}, format="json")
    assert approve.status_code == reject.status_code == 200
    return {"research": research, "serving": serving}


def test_history_as_json(people: dict[str, Any], decided: dict[str, ApprovalRequest]) -> None:
    response = as_user(people, "erin").get(f"{URL}history/")
    assert response.status_code == 200
    page = response.json()
    assert page["count"] == 2
    newest, oldest = page["results"]
    assert list(newest) == list(CSV_COLUMNS)
    assert (newest["approval_id"], newest["action"], newest["actor"]) == (
        decided["serving"].pk,
        "rejected",
        "dave",
    )
    assert newest["message"] == "=1+1 not now"  # only the CSV quotes it
    assert (oldest["approval_id"], oldest["action"], oldest["actor"]) == (
        decided["research"].pk,
        "approved",
        "carol",
    )
    assert oldest["workload"] == "research/job-release-fix" and oldest["requester"] == "alice"
    assert oldest["request_state"] == "approved" and oldest["team"] == "research"
    # Only what one may see; and the filters.
    alice = as_user(people, "alice")
    assert [r["approval_id"] for r in alice.get(f"{URL}history/").json()["results"]] == [
        decided["research"].pk
    ]
    erin = as_user(people, "erin")
    assert erin.get(f"{URL}history/", {"team": "serving"}).json()["count"] == 1
    assert erin.get(f"{URL}history/", {"cluster_queue": "nowhere"}).json()["count"] == 0
    later = (timezone.now() + timedelta(minutes=1)).isoformat()
    assert erin.get(f"{URL}history/", {"since": later}).json()["count"] == 0
    assert erin.get(f"{URL}history/", {"until": later}).json()["count"] == 2


def test_history_as_csv(people: dict[str, Any], decided: dict[str, ApprovalRequest]) -> None:
    erin = as_user(people, "erin")
    json_rows = erin.get(f"{URL}history/").json()["results"]
    for response in (
        erin.get(f"{URL}history/", {"format": "csv"}),
        erin.get(f"{URL}history/", HTTP_ACCEPT="text/csv"),
    ):
        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/csv")
        assert response["Content-Disposition"] == (
            'attachment; filename="berth-approvals-history.csv"'
        )
        reader = csv.reader(io.StringIO(response.content.decode()))
        header, *rows = list(reader)
        assert tuple(header) == CSV_COLUMNS
        assert len(rows) == 2
        as_dicts = [dict(zip(header, row, strict=True)) for row in rows]
        assert [d["approval_id"] for d in as_dicts] == [str(r["approval_id"]) for r in json_rows]
        assert as_dicts[0]["message"] == "'=1+1 not now"  # not a formula in a spreadsheet
        assert as_dicts[1]["actor"] == "carol" and as_dicts[1]["message"] == "go"
        assert as_dicts[1]["job_id"] == ""
    only_serving = as_user(people, "bob").get(f"{URL}history/", {"format": "csv"})
    assert len(list(csv.reader(io.StringIO(only_serving.content.decode())))) == 2


@pytest.mark.parametrize("field", ["since", "until"])
def test_a_bad_history_time_is_a_400_naming_the_field(people: dict[str, Any], field: str) -> None:
    erin = as_user(people, "erin")
    for query in ({field: "yesterday"}, {field: "yesterday", "format": "csv"}):
        response = erin.get(f"{URL}history/", query)
        assert response.status_code == 400
        assert response["Content-Type"].startswith("application/json")  # even when CSV was asked
        assert response.json()["errors"][0]["field"] == field


def test_history_needs_a_login(db: Any) -> None:
    response = APIClient().get(f"{URL}history/", {"format": "csv"})
    assert response.status_code == 401
    assert response["Content-Type"].startswith("application/json")


# --- schema ------------------------------------------------------------------------


def test_the_openapi_schema_documents_approvals(db: Any) -> None:
    out = StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    schema = out.getvalue()
    for path in (
        "/api/v1/approvals/",
        "/api/v1/approvals/{id}/",
        "/api/v1/approvals/{id}/approve/",
        "/api/v1/approvals/{id}/reject/",
        "/api/v1/approvals/history/",
    ):
        assert f"  {path}:" in schema, path
    assert "text/csv" in schema
    assert tuple(HistoryRowSerializer().fields) == CSV_COLUMNS


@pytest.mark.parametrize("who", ["carol", "admin"])
def test_the_list_and_the_inbox_cost_the_same_queries_for_more_requests(
    people: dict[str, Any], who: str
) -> None:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    api = as_user(people, who)
    browser = Client()
    browser.force_login(people[who])

    def queries() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as listed:
            assert api.get("/api/v1/approvals/").status_code == 200
        with CaptureQueriesContext(connection) as inbox:
            assert browser.get("/approvals/").status_code == 200
        return len(listed), len(inbox)

    def add(count: int) -> None:
        for _ in range(count):
            request = approval_request(people["alice"])
            ApprovalEvent.objects.create(
                request=request, action=ApprovalAction.REQUESTED, at=timezone.now()
            )

    add(2)
    queries()  # once first: a token's last use is written at most once a minute
    few = queries()
    add(8)
    assert queries() == few
