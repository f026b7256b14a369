"""The approvals pages on PostgreSQL: who sees the inbox and a request (and who
gets the forms), deciding through the forms, refusals that change nothing, the
history with its CSV export, the overview card, the nav badge and the job page.

The request is research's, in the shared ``urgent`` queue, submitted by rhea
(a research member): carol (research approver), erin (global approver) and the
admin may decide it; alice (research member) follows it read-only; bob
(serving member) and dave (serving approver) do not know it exists."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from approvals.history import CSV_COLUMNS, history_events
from approvals.models import ApprovalAction, ApprovalEvent, ApprovalRequest, ApprovalState
from queues import services
from queues.models import Team
from tests.approvals.approval_support import approval_request, approvers
from tests.factories import user
from tests.jobs.conftest import Org, job, org

__all__ = ["org"]

APPROVE_FORM = 'id="approve-form"'
REJECT_FORM = 'id="reject-form"'
VICTIMS = [
    {
        "workload": "serving/job-llm-batch",
        "status": "would-be-preempted",
        "team": "serving",
        "job_id": None,
        "job": "llm-batch",
        "priority": 1000,
        "priority_class": "train-low",
        "gpus": 8,
        "running_seconds": 5400,
        "checkpoints": True,
        "since_checkpoint_seconds": 1800,
        "gpu_hours_lost": 4.0,
    },
    {
        "workload": "serving/job-eval",
        "status": "preempted",
        "team": "serving",
        "job_id": None,
        "job": "eval",
        "priority": 1000,
        "priority_class": "train-low",
        "gpus": 4,
        "running_seconds": 900,
        "checkpoints": False,
        "since_checkpoint_seconds": 900,
        "gpu_hours_lost": 1.0,
    },
]


@pytest.fixture
def people(org: Org) -> dict[str, Any]:
    """org's users, the approvers, and rhea: the research member who asked."""
    everyone = {**org.users, **approvers(), "rhea": user("rhea")}
    services.set_membership(
        actor=None, team=Team.objects.get(slug="research"), username="rhea", role="member",
        present=True,
    )  # fmt: skip
    return everyone


@pytest.fixture
def asked(people: dict[str, Any]) -> ApprovalRequest:
    request = approval_request(
        people["rhea"],
        impact={
            "computed_at": timezone.now().isoformat(),
            "preempts": VICTIMS,
            "gpus_preempted": 12,
            "gpu_hours_lost": 5.0,
            "summary": "2 running workloads (12 GPUs) make room for it; 5 GPU-hours of their "
            "work is lost",
        },
    )
    ApprovalEvent.objects.create(
        request=request, action=ApprovalAction.REQUESTED, at=request.created_at, message="asked"
    )
    return request


def signed_in(people: dict[str, Any], who: str) -> Client:
    client = Client()
    client.force_login(people[who])
    return client


def html(response: Any, status: int = 200) -> str:
    assert response.status_code == status, (response.status_code, response.content[:500])
    return response.content.decode()


def section(page: str, element_id: str) -> str:
    """The HTML from the element with ``element_id`` up to the next card."""
    start = page.index(f'id="{element_id}"')
    end = page.find('<div class="card"', start)
    return page[start : end if end != -1 else None]


# ---------------------------------------------------------------- who sees what


@pytest.mark.parametrize(
    ("who", "status", "forms"),
    [
        ("carol", 200, True),  # research's approver
        ("erin", 200, True),  # global approver
        ("admin", 200, True),
        ("alice", 200, False),  # research member: follows it, read-only
        ("rhea", 200, False),  # asked for it: never decides it
        ("bob", 404, False),  # serving member
        ("dave", 404, False),  # serving's approver: not his team's request
    ],
)
def test_the_request_page_is_for_its_team_and_its_approvers(
    people: dict[str, Any], asked: ApprovalRequest, who: str, status: int, forms: bool
) -> None:
    response = signed_in(people, who).get(f"/approvals/{asked.pk}/")
    assert response.status_code == status
    if status != 200:
        return
    page = response.content.decode()
    assert f"Approval #{asked.pk}" in page
    assert "release 2026.12 blocker" in page  # the justification
    assert (APPROVE_FORM in page, REJECT_FORM in page) == (forms, forms)
    if not forms:
        assert 'id="read-only"' in page


def test_the_requester_is_told_why_there_are_no_forms(
    people: dict[str, Any], asked: ApprovalRequest
) -> None:
    # carol is an approver for research, but not of her own request.
    mine = approval_request(people["carol"], workload_uid="uid-carol")
    page = html(signed_in(people, "carol").get(f"/approvals/{mine.pk}/"))
    assert APPROVE_FORM not in page and REJECT_FORM not in page
    assert "you submitted this job" in section(page, "read-only")


@pytest.mark.parametrize(
    ("who", "status", "listed", "decidable"),
    [
        ("carol", 200, True, True),
        ("erin", 200, True, True),
        ("admin", 200, True, True),
        ("alice", 200, True, False),
        ("rhea", 200, True, False),
        ("dave", 200, False, False),  # an approver elsewhere has an inbox, without it
        ("bob", 404, False, False),
    ],
)
def test_the_inbox_lists_what_each_may_see_and_decide(
    people: dict[str, Any],
    asked: ApprovalRequest,
    who: str,
    status: int,
    listed: bool,
    decidable: bool,
) -> None:
    response = signed_in(people, who).get("/approvals/")
    assert response.status_code == status
    if status != 200:
        return
    page = response.content.decode()
    assert "data-live" in page
    assert (f'data-approval="{asked.pk}"' in page) is listed
    to_decide = section(page, "to-decide") if 'id="to-decide"' in page else ""
    assert (f'data-approval="{asked.pk}"' in to_decide) is decidable
    if decidable:
        row = to_decide[to_decide.index(f'data-approval="{asked.pk}"') :]
        row = row[: row.index("</tr>")]
        assert "rhea" in row and "research" in row and "urgent" in row
        assert "release 2026.12 blocker" in row
        assert "2 running workloads (12 GPUs)" in row
        assert 'data-col="gpu-hours-lost">5.00<' in row
        assert "h 59 min left" in row or "4 h left" in row


def test_signed_out_visitors_are_sent_to_sign_in(asked: ApprovalRequest) -> None:
    for path in ("/approvals/", f"/approvals/{asked.pk}/", "/approvals/history/"):
        response = Client().get(path)
        assert response.status_code == 302, path
        assert response["Location"].startswith("/login/?next=")


def test_the_inbox_tabs_filter_by_state(people: dict[str, Any], asked: ApprovalRequest) -> None:
    done = approval_request(
        people["rhea"],
        workload_uid="uid-done",
        state=ApprovalState.REJECTED,
        decided_by=people["carol"],
        decided_at=timezone.now(),
        comment="not this week",
    )
    carol = signed_in(people, "carol")
    inbox = html(carol.get("/approvals/"))
    assert f'data-approval="{done.pk}"' in section(inbox, "recent")
    assert "not this week" in section(inbox, "recent")
    rejected = html(carol.get("/approvals/?state=rejected"))
    assert f'data-approval="{done.pk}"' in rejected
    assert f'data-approval="{asked.pk}"' not in rejected
    pending = html(carol.get("/approvals/?state=pending"))
    assert f'data-approval="{asked.pk}"' in pending
    assert f'data-approval="{done.pk}"' not in pending
    assert 'data-tab="rejected" class="active"' in rejected


def test_the_request_page_shows_the_impact_preview_and_audit_trail(
    people: dict[str, Any], asked: ApprovalRequest
) -> None:
    page = html(signed_in(people, "carol").get(f"/approvals/{asked.pk}/"))
    impact = section(page, "approval-impact")
    assert "2 running workloads (12 GPUs)" in impact
    batch = impact[impact.index('data-victim="serving/job-llm-batch"') :]
    batch = batch[: batch.index("</tr>")]
    for text in ("llm-batch", "serving", "train-low (1000)", ">8<", "1 h 30 min", "30 min", "4.00"):
        assert text in batch, text
    assert "would be preempted" in batch
    evaluation = impact[impact.index('data-victim="serving/job-eval"') :]
    evaluation = evaluation[: evaluation.index("</tr>")]
    assert "no checkpoints" in evaluation and ">preempted<" in evaluation
    audit = section(page, "approval-audit")
    assert 'data-action="requested"' in audit and "asked" in audit


# --------------------------------------------------------------------- deciding


def test_an_approver_approves_with_a_comment(
    people: dict[str, Any], asked: ApprovalRequest, django_capture_on_commit_callbacks: Any
) -> None:
    carol = signed_in(people, "carol")
    with django_capture_on_commit_callbacks(execute=True):
        response = carol.post(
            f"/approvals/{asked.pk}/", {"action": "approve", "comment": "ship it"}
        )
    assert response.status_code == 302
    assert response["Location"] == f"/approvals/{asked.pk}/"
    asked.refresh_from_db()
    assert (asked.state, asked.decided_by, asked.comment) == (
        ApprovalState.APPROVED,
        people["carol"],
        "ship it",
    )
    page = html(carol.get(response["Location"]))
    assert f"Approved approval #{asked.pk}" in section(page, "approval-messages")
    assert 'data-state="approved"' in page
    assert APPROVE_FORM not in page and REJECT_FORM not in page
    assert "<span data-decided-by>carol</span>" in page
    audit = section(page, "approval-audit")
    assert 'data-action="approved"' in audit and "ship it" in audit
    # The apply task ran on commit: no Workload on the simulated cluster, so it is
    # marked applied.
    assert 'data-action="applied"' in audit
    assert "written" in section(page, "approval-summary")


def test_an_approver_rejects_with_a_reason(people: dict[str, Any], asked: ApprovalRequest) -> None:
    response = signed_in(people, "erin").post(
        f"/approvals/{asked.pk}/", {"action": "reject", "reason": "no eval results yet"}
    )
    assert response.status_code == 302
    asked.refresh_from_db()
    assert (asked.state, asked.decided_by, asked.comment) == (
        ApprovalState.REJECTED,
        people["erin"],
        "no eval results yet",
    )


def test_a_reject_without_a_reason_shows_the_error_and_changes_nothing(
    people: dict[str, Any], asked: ApprovalRequest
) -> None:
    events = ApprovalEvent.objects.count()
    page = html(
        signed_in(people, "carol").post(
            f"/approvals/{asked.pk}/", {"action": "reject", "reason": "   ", "comment": "x"}
        )
    )
    reject = section(page, "decide")[section(page, "decide").index(REJECT_FORM) :]
    assert 'id="reason-error" data-field="reason" data-rule="required"' in reject
    assert "a reason is required to reject" in reject
    assert 'aria-invalid="true"' in reject
    assert APPROVE_FORM in page  # still pending: both forms are still there
    asked.refresh_from_db()
    assert (asked.state, asked.decided_by, asked.comment) == (ApprovalState.PENDING, None, "")
    assert ApprovalEvent.objects.count() == events


def test_an_unknown_action_is_refused_and_changes_nothing(
    people: dict[str, Any], asked: ApprovalRequest
) -> None:
    events = ApprovalEvent.objects.count()
    response = signed_in(people, "carol").post(
        f"/approvals/{asked.pk}/", {"action": "escalate", "comment": "x"}
    )
    assert response.status_code == 400
    assert "choose Approve or Reject" in response.content.decode()
    asked.refresh_from_db()
    assert (asked.state, asked.decided_by) == (ApprovalState.PENDING, None)
    assert ApprovalEvent.objects.count() == events


def test_a_second_decision_is_told_who_decided_first(
    people: dict[str, Any], asked: ApprovalRequest
) -> None:
    assert (
        signed_in(people, "carol")
        .post(f"/approvals/{asked.pk}/", {"action": "approve"})
        .status_code
        == 302
    )
    decided_at = ApprovalRequest.objects.get(pk=asked.pk).decided_at
    assert decided_at is not None
    # erin had the page open from before: her Reject arrives second.
    page = html(
        signed_in(people, "erin").post(
            f"/approvals/{asked.pk}/", {"action": "reject", "reason": "too late?"}
        )
    )
    refused = section(page, "decision-refused")
    assert "Already decided" in refused
    assert f"already approved by carol at {decided_at:%Y-%m-%d %H:%M:%S} UTC" in refused
    asked.refresh_from_db()
    assert (asked.state, asked.decided_by, asked.decided_at) == (
        ApprovalState.APPROVED,
        people["carol"],
        decided_at,
    )


@pytest.mark.parametrize(
    ("who", "rule"), [("alice", "not-an-approver"), ("rhea", "requester-cannot-decide")]
)
def test_someone_who_may_not_decide_gets_403_and_nothing_changes(
    people: dict[str, Any], asked: ApprovalRequest, who: str, rule: str
) -> None:
    page = html(
        signed_in(people, who).post(f"/approvals/{asked.pk}/", {"action": "approve"}), status=403
    )
    assert f'data-rule="{rule}"' in section(page, "decision-refused")
    assert "Not allowed" in page
    asked.refresh_from_db()
    assert asked.state == ApprovalState.PENDING


def test_another_teams_approver_cannot_even_post(
    people: dict[str, Any], asked: ApprovalRequest
) -> None:
    response = signed_in(people, "dave").post(f"/approvals/{asked.pk}/", {"action": "approve"})
    assert response.status_code == 404
    asked.refresh_from_db()
    assert asked.state == ApprovalState.PENDING


# ---------------------------------------------------------------------- history


@pytest.fixture
def decided(people: dict[str, Any], asked: ApprovalRequest) -> ApprovalRequest:
    """asked, rejected by carol with a reason a spreadsheet would run as a formula;
    and a serving request decided by dave."""
    assert (
        signed_in(people, "carol")
        .post(f"/approvals/{asked.pk}/", {"action": "reject", "reason": '=HYPERLINK("x")'})
        .status_code
        == 302
    )
    serving = approval_request(
        people["bob"],
        workload_uid="uid-serving",
        namespace="serving",
        team=Team.objects.get(slug="serving"),
    )
    assert (
        signed_in(people, "dave")
        .post(f"/approvals/{serving.pk}/", {"action": "approve"})
        .status_code
        == 302
    )
    return asked


def test_the_history_page_lists_and_filters_events(
    people: dict[str, Any], decided: ApprovalRequest
) -> None:
    admin = signed_in(people, "admin")
    page = html(admin.get("/approvals/history/"))
    table = section(page, "history-table")
    assert table.count("data-event=") == 3  # requested, rejected, approved
    assert 'href="/approvals/history.csv"' in page
    research = html(admin.get("/approvals/history/?team=research&queue=urgent"))
    assert section(research, "history-table").count("data-event=") == 2
    assert 'href="/approvals/history.csv?team=research&amp;queue=urgent"' in research
    today = timezone.now().date()
    future = html(admin.get(f"/approvals/history/?since={today + timedelta(days=1)}"))
    assert "data-event=" not in section(future, "history-table")
    same_day = html(admin.get(f"/approvals/history/?since={today}&until={today}"))
    assert section(same_day, "history-table").count("data-event=") == 3
    # carol sees research's history only.
    carols = html(signed_in(people, "carol").get("/approvals/history/"))
    assert section(carols, "history-table").count("data-event=") == 2


def test_a_bad_date_names_the_field(people: dict[str, Any], decided: ApprovalRequest) -> None:
    carol = signed_in(people, "carol")
    page = html(carol.get("/approvals/history/?since=yesterday"))
    assert 'data-field="since" data-rule="date"' in page
    assert "data-event=" not in page
    response = carol.get("/approvals/history.csv?until=2026-13-01")
    assert response.status_code == 400
    assert response.content.decode().startswith("until: a date as YYYY-MM-DD")


def test_the_csv_export_is_the_history_with_its_filters(
    people: dict[str, Any], decided: ApprovalRequest
) -> None:
    response = signed_in(people, "admin").get("/approvals/history.csv?team=research")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith('attachment; filename="berth-approvals-')
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert tuple(rows[0]) == CSV_COLUMNS
    records = [dict(zip(CSV_COLUMNS, row, strict=True)) for row in rows[1:]]
    expected = history_events(people["admin"], team="research")
    assert [int(r["approval_id"]) for r in records] == [e.request_id for e in expected]
    assert [r["action"] for r in records] == ["rejected", "requested"]
    assert records[0]["actor"] == "carol" and records[0]["team"] == "research"
    assert records[0]["message"] == '\'=HYPERLINK("x")'  # not a formula in a spreadsheet
    everything = signed_in(people, "admin").get("/approvals/history.csv")
    assert len(list(csv.reader(io.StringIO(everything.content.decode())))) == 1 + 3


def test_the_history_is_not_for_everyone(people: dict[str, Any], decided: ApprovalRequest) -> None:
    outsider = user("zoe")
    client = Client()
    client.force_login(outsider)
    assert client.get("/approvals/history/").status_code == 404
    assert client.get("/approvals/history.csv").status_code == 404


# ------------------------------------------------------------ overview and nav


def test_the_overview_card_counts_what_you_can_decide(
    people: dict[str, Any], asked: ApprovalRequest
) -> None:
    carol = section(html(signed_in(people, "carol").get("/")), "approvals")
    assert 'data-figure-name="approvals-to-decide">1<' in carol
    assert f'href="/approvals/{asked.pk}/"' in section(carol, "approvals-oldest")
    assert 'href="/approvals/"' in carol
    dave = section(html(signed_in(people, "dave").get("/")), "approvals")
    assert 'data-figure-name="approvals-to-decide">0<' in dave and "Nothing waits for you" in dave
    alice = section(html(signed_in(people, "alice").get("/")), "approvals")
    assert 'data-figure-name="approvals-following">1<' in alice
    bob = section(html(signed_in(people, "bob").get("/")), "approvals")
    assert "none of yours has asked yet" in bob and 'href="/approvals/"' not in bob


def test_the_nav_shows_approvals_with_a_count_for_approvers(
    people: dict[str, Any], asked: ApprovalRequest
) -> None:
    carol = html(signed_in(people, "carol").get("/jobs/"))
    header = carol[carol.index("<header>") : carol.index("</header>")]
    assert 'id="nav-approvals"' in header
    assert '<span class="nav-badge" title="1 waiting for your decision">1</span>' in header
    alice = html(signed_in(people, "alice").get("/jobs/"))
    header = alice[alice.index("<header>") : alice.index("</header>")]
    assert 'id="nav-approvals"' in header and "nav-badge" not in header  # follows, decides none
    bob = html(signed_in(people, "bob").get("/jobs/"))
    assert 'id="nav-approvals"' not in bob


def test_the_job_page_shows_its_approval_and_timeline(org: Org, people: dict[str, Any]) -> None:
    job_id = org.alice.post(
        "/api/v1/jobs/", job(name="release-fix", justification="release blocker"), format="json"
    ).json()["id"]
    asked = approval_request(people["alice"], job_id=job_id)
    ApprovalEvent.objects.create(
        request=asked, action=ApprovalAction.REQUESTED, at=timezone.now(), message="asked"
    )
    signed_in(people, "carol").post(
        f"/approvals/{asked.pk}/", {"action": "approve", "comment": "go"}
    )
    page = html(signed_in(people, "alice").get(f"/jobs/{job_id}/"))
    summary = page[page.index('id="job-approval"') :]
    summary = summary[: summary.index("</tr>")]
    assert f'href="/approvals/{asked.pk}/"' in summary and "approved" in summary
    assert "by carol" in summary and "go" in summary
    timeline = section(page, "job-timeline")
    approved = timeline[timeline.index('data-approval-event="approved"') :]
    approved = approved[: approved.index("</tr>")]
    assert "approval approved" in approved and "carol: go" in approved
    assert f"approval #{asked.pk}" in approved
    assert 'data-approval-event="requested"' in timeline
