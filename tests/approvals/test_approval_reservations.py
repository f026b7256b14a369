"""The impact preview and workloads that hold quota only as a reservation
(quota reserved, an admission check such as Berth's approval still Pending).

Kueue's preemption takes its candidates from every workload holding quota in
the contested queues, admitted or only reserved, and orders them (after the
ones already being evicted, and other queues' before the preemptor's own) by
priority, then by when their quota was reserved, most recent first. So a
workload waiting for approval can be preempted to make room for another one,
by the same rules as a running one: the preview lists it then, but as what it
is (not running: it loses its reservation and queues again; no work is lost),
and never when Kueue would take another workload instead."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from approvals.impact import impact_preview
from approvals.status import CHECK_NAME
from cluster.models import EventType, WorkloadEvent, WorkloadRecord
from queues.models import Team
from tests.approvals.approval_support import approval_request
from tests.jobs.conftest import Org

GPU = "nvidia.com/gpu"


def workload(
    queue: str,
    name: str,
    *,
    state: str,
    priority: int = 1000,
    gpus: int = 8,
    minutes: int = 0,
    check: str | None = None,
    namespace: str = "research",
) -> WorkloadRecord:
    """A workload as sync records it: ``admitted`` (running since ``minutes``
    ago), ``quota-reserved`` (reserved ``minutes`` ago, its check ``check``) or
    ``pending``."""
    now = timezone.now()
    since = now - timedelta(minutes=minutes)
    holds = state != "pending"
    return WorkloadRecord.objects.create(
        uid=f"uid-{name}",
        namespace=namespace,
        name=name,
        cluster_queue=queue,
        local_queue=queue,
        team=Team.objects.get(slug=namespace),
        priority=priority,
        requested={GPU: gpus},
        pod_sets=[{"name": "main", "count": 1, "requests": {GPU: gpus}}],
        flavors={"main": {GPU: "h100"}} if holds else {},
        admission_checks={CHECK_NAME: {"state": check}} if check else {},
        state=state,
        created_at=since - timedelta(minutes=1),
        reserved_at=since if holds else None,
        admitted_at=since if state == "admitted" else None,
    )


def fill_the_cohort_but_urgent() -> None:
    """Every on-demand H100 of the cohort outside the urgent queue busy, at
    nominal (no queue borrows, so nothing is reclaimable)."""
    for name in ("train-a", "train-b"):
        workload("research", name, state="admitted", minutes=60)
    for name in ("serve-a", "serve-b"):
        workload("serving", name, state="admitted", minutes=60, namespace="serving")
    workload("research-dev", "notebook", state="admitted", priority=0, minutes=60)


def test_kueue_takes_the_most_recently_reserved_not_the_one_waiting_for_approval(
    org: Org,
) -> None:
    """Two equal-priority workloads share the urgent queue: one reserved ten
    minutes ago and still waiting for approval, one reserved (and admitted,
    approved) five minutes ago. Kueue preempts the most recently reserved: the
    running one, not the one waiting."""
    fill_the_cohort_but_urgent()
    workload("urgent", "waiting", state="quota-reserved", gpus=4, minutes=10, check="Pending")
    workload("urgent", "approved", state="admitted", gpus=4, minutes=5, check="Ready")
    urgent = workload("urgent", "release-fix", state="pending", priority=100000, gpus=4)

    preview = impact_preview(urgent, timezone.now())
    assert [(v["workload"], v["state"]) for v in preview["preempts"]] == [
        ("research/approved", "running")
    ], preview
    assert 4 * 60 <= preview["preempts"][0]["running_seconds"] <= 6 * 60


def test_a_workload_waiting_for_approval_is_listed_as_losing_its_reservation_not_running(
    org: Org,
) -> None:
    fill_the_cohort_but_urgent()
    waiting = workload("urgent", "waiting", state="quota-reserved", minutes=10, check="Pending")
    its_request = approval_request(
        None, workload_uid=waiting.uid, workload_name=waiting.name, gpus=8
    )
    urgent = workload("urgent", "release-fix", state="pending", priority=100000)

    preview = impact_preview(urgent, timezone.now())
    [victim] = preview["preempts"]
    assert victim["workload"] == "research/waiting"
    assert victim["status"] == "would-be-preempted" and victim["state"] == "reserved"
    assert victim["waiting_for"] == [CHECK_NAME]
    assert victim["approval_id"] == its_request.pk
    assert victim["running_seconds"] == 0 and victim["gpu_hours_lost"] == 0
    assert preview["gpu_hours_lost"] == 0 and preview["gpus_preempted"] == 8
    assert "running" not in preview["summary"].replace("not running", "")
    assert "waiting for approval" in preview["summary"]
    assert "loses its quota reservation" in preview["summary"]


def test_one_preempted_while_waiting_for_approval_had_not_run(org: Org) -> None:
    """The cluster's view: Kueue preempted it for this workload while it waited
    for approval, after an earlier stretch that ran and was evicted. The time
    before that eviction is not what this approval costs."""
    urgent = workload("urgent", "release-fix", state="quota-reserved", priority=100000)
    victim = workload("urgent", "waiting", state="pending")
    now = timezone.now().replace(microsecond=0)
    for kind, minutes_ago in (
        (EventType.QUOTA_RESERVED, 60),
        (EventType.ADMITTED, 60),
        (EventType.EVICTED, 30),
        (EventType.QUOTA_RESERVED, 20),
    ):
        WorkloadEvent.objects.create(
            workload=victim, type=kind, at=now - timedelta(minutes=minutes_ago)
        )
    WorkloadEvent.objects.create(
        workload=victim,
        type=EventType.PREEMPTED,
        at=now - timedelta(minutes=1),
        reason="InClusterQueue",
        details={"preemptor_uid": urgent.uid},
    )

    preview = impact_preview(urgent, now)
    [row] = preview["preempts"]
    assert (row["workload"], row["status"], row["state"]) == (
        "research/waiting",
        "preempted",
        "reserved",
    )
    assert row["running_seconds"] == 0 and row["gpu_hours_lost"] == 0


def test_a_running_victim_still_counts_its_running_time(org: Org, settings: Any) -> None:
    fill_the_cohort_but_urgent()
    workload("urgent", "running", state="admitted", minutes=30, check="Ready")
    urgent = workload("urgent", "release-fix", state="pending", priority=100000)
    preview = impact_preview(urgent, timezone.now())
    [victim] = preview["preempts"]
    assert victim["state"] == "running" and victim["waiting_for"] == []
    assert 29 * 60 <= victim["running_seconds"] <= 31 * 60
    assert victim["gpu_hours_lost"] > 0
    assert preview["summary"].startswith("1 running workload (8 GPUs) makes room for it")


def test_the_request_page_shows_a_reserved_victim_as_not_running(org: Org, client: Any) -> None:
    fill_the_cohort_but_urgent()
    waiting = workload("urgent", "waiting", state="quota-reserved", minutes=10, check="Pending")
    its_request = approval_request(
        None, workload_uid=waiting.uid, workload_name=waiting.name, gpus=8
    )
    urgent = workload("urgent", "release-fix", state="pending", priority=100000)
    request = approval_request(
        org.users["alice"], workload_uid=urgent.uid, impact=impact_preview(urgent, timezone.now())
    )
    client.force_login(org.users["admin"])
    page = client.get(f"/approvals/{request.pk}/").content.decode()
    row = page.split('data-victim="research/waiting"', 1)[1].split("</tr>", 1)[0]
    assert 'data-victim-state="reserved"' in row
    assert "not running" in row and f"/approvals/{its_request.pk}/" in row
    assert "would lose its reservation" in row and "would be preempted" not in row
