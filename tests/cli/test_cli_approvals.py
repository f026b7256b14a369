"""``berth approvals`` against a real Berth over HTTP (pytest-django's live
server), called in-process: list, show, approve and reject, and the refusals
(a missing or empty reason, someone else's decision, no right to decide)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from accounts.services import create_token
from approvals.models import ApprovalAction, ApprovalEvent, ApprovalRequest, ApprovalState
from queues.models import Team
from tests.approvals.approval_support import approval_request, approvers
from tests.cli.test_cli import Berth, one_line
from tests.jobs.conftest import Org

As = Callable[[str], Berth]


@pytest.fixture
def people(transactional_db: Any, org: Org) -> dict[str, Any]:
    return dict(org.users) | approvers()


@pytest.fixture
def as_user(
    people: dict[str, Any],
    live_server: Any,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> As:
    """``as_user("carol")("approvals", "list")``: berth with that person's token."""
    monkeypatch.setenv("BERTH_CONFIG", str(tmp_path / "config.json"))
    monkeypatch.setenv("BERTH_URL", live_server.url)
    secrets = {name: create_token(user=who, name="cli").secret for name, who in people.items()}

    def pick(name: str) -> Berth:
        monkeypatch.setenv("BERTH_TOKEN", secrets[name])
        return Berth(capsys)

    return pick


@pytest.fixture
def requests(people: dict[str, Any]) -> dict[str, ApprovalRequest]:
    """mine: alice's, pending, preempting one workload; own: carol's own;
    done: alice's, approved by erin; serving: bob's."""
    now = timezone.now()
    return {
        "done": approval_request(
            people["alice"],
            workload_name="job-done",
            state=ApprovalState.APPROVED,
            decided_by=people["erin"],
            decided_at=now,
            comment="fine",
            created_at=now - timedelta(hours=3),
        ),
        "own": approval_request(
            people["carol"], workload_name="job-own", created_at=now - timedelta(hours=2)
        ),
        "serving": approval_request(
            people["bob"],
            team=Team.objects.get(slug="serving"),
            namespace="serving",
            workload_name="job-serving",
            created_at=now - timedelta(hours=1),
        ),
        "mine": approval_request(
            people["alice"],
            impact={
                "preempts": [
                    {
                        "workload": "serving/job-batch",
                        "team": "serving",
                        "priority": 1000,
                        "gpus": 8,
                        "gpu_hours_lost": 3.5,
                        "status": "would-be-preempted",
                    }
                ],
                "gpus_preempted": 8,
                "gpu_hours_lost": 3.5,
                "summary": "Preempts 1 running workload (8 GPUs): 3.5 GPU-hours lost",
            },
        ),
    }


def fields(out: str) -> dict[str, str]:
    """``Label:   value`` lines of `approvals show` (up to the first blank line)."""
    head = out.split("\n\n", 1)[0]
    return {
        label: value.strip()
        for label, _, value in (line.partition(":  ") for line in head.splitlines())
    }


def table_ids(out: str) -> list[int]:
    header, *rows = out.strip().splitlines()
    assert header.split()[:3] == ["ID", "STATE", "WORKLOAD"]
    return [int(row.split()[0]) for row in rows]


def test_list_shows_what_waits_for_me_and_all_with_all(
    as_user: As, requests: dict[str, ApprovalRequest]
) -> None:
    carol = as_user("carol")
    code, out, err = carol("approvals", "list")
    assert code == 0, err
    header = out.splitlines()[0].split()
    assert header == [
        "ID", "STATE", "WORKLOAD", "QUEUE", "TEAM", "REQUESTER", "GPUS", "IMPACT", "EXPIRES",
    ]  # fmt: skip
    assert table_ids(out) == [requests["mine"].pk]
    row = out.splitlines()[1]
    assert "research/job-release-fix" in row and "urgent" in row and "alice" in row
    assert "3.5 GPU-h, 1 preempted" in row
    assert row.endswith(("in 4h", "in 3h59m"))  # four hours to decide it
    code, out, _ = carol("approvals", "list", "--all")
    assert code == 0
    assert table_ids(out) == [requests["mine"].pk, requests["own"].pk, requests["done"].pk]
    code, out, _ = carol("approvals", "list", "--state", "approved")
    assert table_ids(out) == [requests["done"].pk]
    code, out, _ = carol("approvals", "list", "-o", "json")
    [item] = json.loads(out)
    assert item["id"] == requests["mine"].pk and item["can_decide"] is True
    code, out, _ = as_user("erin")("approvals", "list", "--team", "serving")
    assert table_ids(out) == [requests["serving"].pk]
    code, out, _ = as_user("alice")("approvals", "list")
    assert (code, out.strip()) == (0, "No approval requests wait for you.")
    code, _, err = carol("approvals", "list", "--state", "maybe")
    assert code == 2 and "--state" in one_line(err)


def test_show_prints_the_request_its_impact_and_history(
    as_user: As, requests: dict[str, ApprovalRequest]
) -> None:
    mine = requests["mine"].pk
    code, out, err = as_user("carol")("approvals", "show", str(mine))
    assert code == 0, err
    shown = fields(out)
    assert shown["Approval"] == f"#{mine} (attempt 1)"
    assert shown["State"] == "pending: you can decide it"
    assert shown["Workload"] == "research/job-release-fix"
    assert shown["Queue"] == "urgent → ClusterQueue urgent"
    assert (shown["Team"], shown["Requester"], shown["GPUs"]) == ("research", "alice", "8")
    assert shown["Justification"] == "release 2026.12 blocker: regression in eval"
    assert shown["Impact"].startswith("Preempts 1 running workload")
    assert shown["Expires"].endswith(("(in 4h)", "(in 3h59m)"))
    assert "serving/job-batch" in out and "would-be-preempted" in out
    assert "(no events)" in out
    code, out, _ = as_user("alice")("approvals", "show", str(mine), "-o", "yaml")
    assert code == 0 and f"id: {mine}" in out and "can_decide: false" in out
    code, _, err = as_user("bob")("approvals", "show", str(mine))
    assert code == 1 and one_line(err) == f"berth: no approval request #{mine} that you can see"
    code, _, err = as_user("bob")("approvals", "show", "twelve")
    assert code == 2 and "not an approval id" in one_line(err)


def test_approve_then_a_second_decision_names_who_decided(
    as_user: As, people: dict[str, Any], requests: dict[str, ApprovalRequest]
) -> None:
    request = requests["mine"]
    code, out, err = as_user("carol")(
        "approvals", "approve", str(request.pk), "--comment", "release blocker"
    )
    assert code == 0, err
    assert out.splitlines() == [
        f"Approved #{request.pk}: research/job-release-fix (8 GPUs in ClusterQueue urgent, "
        "requested by alice).",
        "Berth marks its admission check Ready on the Workload.",
    ]
    request.refresh_from_db()
    assert request.state == ApprovalState.APPROVED and request.decided_by == people["carol"]
    assert request.comment == "release blocker"
    # The apply task ran on commit (eager Celery) against the simulated cluster,
    # which has no such Workload.
    assert request.applied_at is not None
    assert list(ApprovalEvent.objects.filter(request=request).values_list("action", flat=True)) == [
        ApprovalAction.APPROVED,
        ApprovalAction.APPLIED,
    ]
    code, out, err = as_user("erin")("approvals", "reject", str(request.pk), "--reason", "no")
    assert code == 1 and out == ""
    line = one_line(err)
    assert f"approval #{request.pk} is already approved by carol" in line
    assert "release blocker" in line
    request.refresh_from_db()
    assert request.state == ApprovalState.APPROVED and request.decided_by == people["carol"]
    code, out, _ = as_user("erin")("approvals", "show", str(request.pk))
    shown = fields(out)
    assert shown["State"].startswith("approved by carol at ")
    assert shown["State"].endswith(": release blocker")
    assert shown["On the Workload"] != "not yet"
    history = out.split("History:\n", 1)[1].splitlines()
    assert history[0].split() == ["TIME", "ACTION", "BY", "MESSAGE"]
    assert [line.split()[2:4] for line in history[1:]] == [["approved", "carol"], ["applied", "-"]]


def test_reject_with_a_reason(as_user: As, requests: dict[str, ApprovalRequest]) -> None:
    request = requests["mine"]
    code, out, err = as_user("erin")(
        "approvals", "reject", str(request.pk), "--reason", "  not a release blocker ", "-o", "json"
    )
    assert code == 0, err
    answer = json.loads(out)
    assert answer["state"] == "rejected" and answer["comment"] == "not a release blocker"
    request.refresh_from_db()
    assert request.state == ApprovalState.REJECTED


def test_a_rejection_without_a_reason_is_refused_before_anything_is_sent(
    as_user: As, requests: dict[str, ApprovalRequest]
) -> None:
    request = requests["mine"]
    carol = as_user("carol")
    code, out, err = carol("approvals", "reject", str(request.pk))
    assert code == 2 and out == ""
    assert "--reason" in one_line(err) and "required" in err
    for blank in ("", "   "):
        code, out, err = carol("approvals", "reject", str(request.pk), "--reason", blank)
        assert code == 2 and out == ""
        assert one_line(err) == (
            "berth: --reason must say why it may not run (the requester sees it)"
        )
    request.refresh_from_db()
    assert request.state == ApprovalState.PENDING
    assert not ApprovalEvent.objects.filter(request=request).exists()


def test_refusals_from_the_api_are_one_line_each(
    as_user: As, requests: dict[str, ApprovalRequest]
) -> None:
    code, _, err = as_user("alice")("approvals", "approve", str(requests["mine"].pk))
    assert code == 1
    assert one_line(err).startswith("berth: not allowed: you submitted this job")
    assert err.strip().endswith("(requester-cannot-decide)")
    code, _, err = as_user("dave")("approvals", "approve", str(requests["mine"].pk))
    assert code == 1 and "no approval request" in one_line(err)
    code, _, err = as_user("carol")(
        "approvals", "approve", str(requests["mine"].pk), "--comment", "x" * 4001
    )
    assert code == 2
    assert one_line(err).startswith("berth: comment: at most 4000 characters")
    assert err.strip().endswith("(max-length)")
    code, _, err = as_user("carol")("approvals")
    assert code == 2 and "COMMAND" in one_line(err)
    pending = ApprovalRequest.objects.filter(state=ApprovalState.PENDING).count()
    assert pending == 3 and not ApprovalEvent.objects.exists()


def test_the_impact_summary_tells_reservations_from_running_work() -> None:
    from berth_cli.approvals import impact_text

    impact = {
        "gpu_hours_lost": 3.5,
        "preempts": [
            {"workload": "a/run", "state": "running"},
            {"workload": "b/wait", "state": "reserved"},
        ],
    }
    assert impact_text(impact) == "3.5 GPU-h, 1 preempted, 1 lose a reservation"
