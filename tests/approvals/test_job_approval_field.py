"""The job detail shows the job's latest approval request (``approval``), in
the shape ``berth status`` and ``berth why`` read: null for a job that never
needed one; else its id, state, when it was asked, its deadline, who decided
and when, the reason (a rejection's reason, an approver's comment, why it was
withdrawn, ``expired``) and the dashboard page."""

from __future__ import annotations

import time
from io import StringIO
from typing import Any

from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.controller import drive_approvals
from approvals.decide import decide
from approvals.models import ApprovalRequest
from tests.approvals.approval_support import approvers
from tests.approvals.test_approvals_flow import raise_request
from tests.jobs.conftest import Org
from tests.jobs.simulated_cluster import URL, Cluster

FIELDS = {"id", "state", "requested_at", "deadline", "decided_by", "decided_at", "reason", "url"}


def test_a_job_without_an_approval_shows_null(org: Org) -> None:
    cluster = Cluster()
    job_id = cluster.submit(org.alice)
    assert org.alice.get(f"{URL}{job_id}/").json()["approval"] is None


def test_the_detail_shows_the_pending_then_the_decided_request(org: Org, settings: Any) -> None:
    settings.BERTH_PUBLIC_URL = "https://berth.example.com"
    people = approvers()
    cluster = Cluster()
    job_id, request = raise_request(cluster, org, time.time())

    pending = org.alice.get(f"{URL}{job_id}/").json()["approval"]
    assert set(pending) == FIELDS
    assert pending["id"] == request.pk and pending["state"] == "pending"
    assert pending["requested_at"] and pending["deadline"]
    assert pending["deadline"] > pending["requested_at"]
    assert (pending["decided_by"], pending["decided_at"], pending["reason"]) == (None, None, None)
    assert pending["url"] == f"https://berth.example.com/approvals/{request.pk}/"

    decide(people["carol"], request.pk, approve=False, comment="not release-blocking")
    rejected = org.alice.get(f"{URL}{job_id}/").json()["approval"]
    assert rejected["state"] == "rejected" and rejected["decided_by"] == "carol"
    assert rejected["decided_at"] is not None and rejected["reason"] == "not release-blocking"


def test_the_latest_attempt_is_the_one_shown(org: Org) -> None:
    approvers()
    cluster = Cluster()
    job_id, first = raise_request(cluster, org, time.time())
    ApprovalRequest.objects.filter(pk=first.pk).update(state="withdrawn", comment="evicted")
    second = ApprovalRequest.objects.create(
        **{
            f.attname: getattr(first, f.attname)
            for f in ApprovalRequest._meta.concrete_fields
            if f.name not in ("id", "attempt", "state", "comment")
        },
        attempt=2,
    )
    shown = org.alice.get(f"{URL}{job_id}/").json()["approval"]
    assert (shown["id"], shown["state"]) == (second.pk, "pending")


def test_a_withdrawn_request_says_why(org: Org) -> None:
    approvers()
    cluster = Cluster()
    job_id, _ = raise_request(cluster, org, time.time())
    org.alice.delete(f"{URL}{job_id}/")
    drive_approvals(cluster.backend)
    shown = org.alice.get(f"{URL}{job_id}/").json()["approval"]
    assert shown["state"] == "withdrawn" and shown["decided_by"] is None
    assert shown["reason"] == "its job release-fix was cancelled by alice"


def test_other_teams_see_neither_the_job_nor_its_approval(org: Org) -> None:
    approvers()
    job_id, _ = raise_request(Cluster(), org, time.time())
    assert org.bob.get(f"{URL}{job_id}/").status_code == 404


def test_the_list_stays_flat_and_without_the_field(org: Org) -> None:
    approvers()
    cluster = Cluster()
    raise_request(cluster, org, time.time())
    for n in range(3):
        cluster.submit(org.alice, name=f"plain-{n}", nodes=1)
    with CaptureQueriesContext(connection) as few:
        rows = org.admin.get(URL).json()["results"]
    assert all("approval" not in row for row in rows)
    for n in range(3, 8):
        cluster.submit(org.alice, name=f"plain-{n}", nodes=1)
    with CaptureQueriesContext(connection) as many:
        org.admin.get(URL)
    assert len(many.captured_queries) == len(few.captured_queries)


def test_the_openapi_schema_documents_the_field(db: Any) -> None:
    out = StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    schema = out.getvalue()
    assert "JobApproval:" in schema
    block = schema.split("    JobApproval:", 1)[1].split("\n    JobList", 1)[0]
    for name in FIELDS:
        assert f"        {name}:" in block, name
    assert "approval:" in schema.split("    Job:", 1)[1].split("\n    JobApproval:", 1)[0]
