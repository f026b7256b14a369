"""A decision is answered for what it is. Stored but its write not queued (the
broker is down): 202 saying what is pending, and the controller's next pass
writes it. Too late (the reservation it asked about has ended, as sync saw):
409 ``reservation-ended``, nothing stored, unless it is a rejection of a
workload that may reserve quota again, which is stored and stands for the
next reservation (202, saying so). And a decision accepted but closed
unwritten later (the reservation ended before the write) is told to the
person who made it."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.core import mail
from rest_framework.test import APIClient

from approvals.controller import drive_approvals
from approvals.decide import RESERVATION_ENDED, AlreadyDecided, decide
from approvals.models import ApprovalAction, ApprovalEvent, ApprovalRequest, ApprovalState
from cluster.models import WorkloadRecord, WorkloadState
from jobs.models import JobState
from tests.approvals.approval_support import approvers
from tests.approvals.test_approvals_flow import (
    _evict_and_return,
    raise_request,
    state,
    workload_check,
)
from tests.factories import token_client
from tests.jobs.conftest import Org
from tests.jobs.simulated_cluster import Cluster
from tests.jobs.test_broker_down import broker_down

URL = "/api/v1/approvals/"


@pytest.fixture
def people(org: Org) -> dict[str, Any]:
    return approvers()


def press(client: APIClient, request: ApprovalRequest, approve: bool) -> Any:
    verb, body = ("approve", {"comment": "go"}) if approve else ("reject", {"reason": "not now"})
    return client.post(f"{URL}{request.pk}/{verb}/", body, format="json")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("approve", [True, False], ids=["approve", "reject"])
def test_a_decision_stored_with_the_broker_down_is_a_202_and_the_pass_writes_it(
    org: Org, people: dict[str, Any], approve: bool
) -> None:
    cluster = Cluster()
    t0 = time.time()
    job_id, request = raise_request(cluster, org, t0)
    with broker_down():
        answer = press(token_client(people["carol"]), request, approve)
    assert answer.status_code == 202, answer.content
    body = answer.json()
    assert body["state"] == (ApprovalState.APPROVED if approve else ApprovalState.REJECTED)
    assert body["applied_at"] is None and "could not be queued" in body["pending"]
    request.refresh_from_db()
    assert request.applied_at is None  # stored, not written
    failed = ApprovalEvent.objects.get(request=request, action=ApprovalAction.APPLY_FAILED)
    assert failed.details == {"queued": False}
    check = workload_check(cluster, job_id)
    assert check is not None and check["state"] == "Pending"

    assert drive_approvals(cluster.backend)["applied"] == 1  # the broker is back: the pass
    check = workload_check(cluster, job_id)
    assert check is not None and check["state"] == ("Ready" if approve else "Rejected")
    request.refresh_from_db()
    assert request.written is True


@pytest.mark.django_db(transaction=True)
def test_with_the_broker_up_a_decision_is_a_200(org: Org, people: dict[str, Any]) -> None:
    cluster = Cluster()
    job_id, request = raise_request(cluster, org, time.time())
    answer = press(token_client(people["carol"]), request, True)
    assert answer.status_code == 200, answer.content
    assert "pending" not in answer.json()
    check = workload_check(cluster, job_id)  # written by the task (eager here)
    assert check is not None and check["state"] == "Ready"


def test_an_approval_after_its_reservation_ended_is_refused_and_nothing_is_stored(
    org: Org, people: dict[str, Any], settings: Any
) -> None:
    settings.BERTH_APPROVAL_GRACE = 15 * 60
    cluster = Cluster()
    t0 = time.time()
    job_id, request = raise_request(cluster, org, t0)
    _evict_and_return(cluster, job_id, t0 + 2)  # sync saw it: a new reservation since
    answer = press(token_client(people["carol"]), request, True)
    assert answer.status_code == 409, answer.content
    assert answer.json()["rule"] == RESERVATION_ENDED
    assert "has ended" in answer.json()["detail"] and "new reservation" in answer.json()["detail"]
    request.refresh_from_db()
    assert request.state == ApprovalState.PENDING and request.decided_by is None
    assert not request.events.filter(action=ApprovalAction.APPROVED).exists()

    # The pass withdraws it and asks about the new reservation: nothing was approved.
    result = drive_approvals(cluster.backend)
    assert result["withdrawn"] == 1 and result["raised"] == 1 and result["reapproved"] == 0
    again = ApprovalRequest.objects.get(job_id=job_id, attempt=2)
    assert again.state == ApprovalState.PENDING


def test_a_late_rejection_stands_for_the_next_reservation_and_says_so(
    org: Org, people: dict[str, Any]
) -> None:
    cluster = Cluster()
    t0 = time.time()
    job_id, request = raise_request(cluster, org, t0)
    _evict_and_return(cluster, job_id, t0 + 2)
    mail.outbox.clear()
    answer = press(token_client(people["carol"]), request, False)
    assert answer.status_code == 202, answer.content
    assert "stands for the workload's next reservation" in answer.json()["pending"]
    request.refresh_from_db()
    assert request.state == ApprovalState.REJECTED and request.written is False
    assert request.applied_at is not None  # closed: nothing to write it to

    result = drive_approvals(cluster.backend)
    assert result["raised"] == 0  # nobody is asked to approve what carol refused
    again = ApprovalRequest.objects.get(job_id=job_id, attempt=2)
    assert again.state == ApprovalState.REJECTED and again.decided_by == people["carol"]
    check = workload_check(cluster, job_id)
    assert check is not None and check["state"] == "Rejected"
    # Told in the answer already: no mail saying it was not written.
    assert not [m for m in mail.outbox if "not written" in m.subject]


@pytest.mark.parametrize("ended", [WorkloadState.FINISHED, WorkloadState.DELETED])
@pytest.mark.parametrize("approve", [True, False], ids=["approve", "reject"])
def test_a_decision_for_a_workload_that_ended_is_refused(
    org: Org, people: dict[str, Any], ended: str, approve: bool
) -> None:
    cluster = Cluster()
    _, request = raise_request(cluster, org, time.time())
    WorkloadRecord.objects.filter(uid=request.workload_uid).update(state=ended)  # as sync saw
    answer = press(token_client(people["carol"]), request, approve)
    assert answer.status_code == 409, answer.content
    assert answer.json()["rule"] == RESERVATION_ENDED
    assert "nothing left to decide" in answer.json()["detail"]
    assert answer.json()["references"] == {"workload_state": [ended]}
    request.refresh_from_db()
    assert request.state == ApprovalState.PENDING
    assert list(request.events.values_list("action", flat=True)) == [
        ApprovalAction.REQUESTED,
        ApprovalAction.NOTIFIED,
    ]


def test_an_approval_closed_unwritten_later_is_told_to_the_approver(
    org: Org, people: dict[str, Any], settings: Any
) -> None:
    """Accepted while sync still saw the reservation (200), then Kueue evicted
    the workload before the write: carol hears that her approval was not
    written, and what happens next."""
    settings.BERTH_APPROVAL_GRACE = 15 * 60
    cluster = Cluster()
    t0 = time.time()
    job_id, request = raise_request(cluster, org, t0)
    answer = press(token_client(people["carol"]), request, True)  # its write is lost here
    assert answer.status_code == 200, answer.content
    _evict_and_return(cluster, job_id, t0 + 2)
    mail.outbox.clear()
    drive_approvals(cluster.backend)
    request.refresh_from_db()
    assert request.applied_at is not None and request.written is False
    [told] = [m for m in mail.outbox if "not written" in m.subject]
    assert told.to == ["carol@example.com"]
    assert "lost the quota" in told.body and "within 15 minutes" in told.body
    notified = request.events.filter(action=ApprovalAction.NOTIFIED).last()
    assert notified is not None and notified.details["about"] == "unwritten"
    drive_approvals(cluster.backend)
    assert len([m for m in mail.outbox if "not written" in m.subject]) == 1  # once
    cluster.at(t0 + 4)
    assert state(job_id) == JobState.RUNNING  # re-approved within the grace window


def test_decide_raises_reservation_ended_as_already_decided(
    org: Org, people: dict[str, Any]
) -> None:
    """The dashboard catches AlreadyDecided: a late decision there is told too."""
    cluster = Cluster()
    _, request = raise_request(cluster, org, time.time())
    WorkloadRecord.objects.filter(uid=request.workload_uid).update(state=WorkloadState.FAILED)
    with pytest.raises(AlreadyDecided) as refused:
        decide(people["carol"], request.pk, approve=True)
    assert refused.value.rule == RESERVATION_ENDED
