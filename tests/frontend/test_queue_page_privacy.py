"""What a team sees of another team's work in a shared line: its place, size,
priority and estimated start (they explain its own wait), not its name, job,
messages or who it preempted — Kueue's own visibility gives a namespace only
its LocalQueues' workloads. Admins see everything."""

from __future__ import annotations

from datetime import timedelta

from django.test import Client
from django.utils import timezone

from cluster.models import PendingForecast, WorkloadEvent, WorkloadRecord
from tests.jobs.conftest import Org, org

__all__ = ["org"]


def urgent_line() -> None:
    """Two pending workloads in the shared urgent queue, one per team, and a
    preemption of research's by serving's."""
    now = timezone.now()
    for position, (namespace, name) in enumerate(
        (("research", "fix-eval"), ("serving", "secret-launch")), start=1
    ):
        workload = WorkloadRecord.objects.create(
            uid=f"uid-{name}",
            namespace=namespace,
            name=f"job-{name}",
            cluster_queue="urgent",
            state="pending",
            requested={"nvidia.com/gpu": 8},
            created_at=now - timedelta(minutes=position),
        )
        PendingForecast.objects.create(
            workload=workload,
            cluster_queue="urgent",
            position=position,
            reason="Pending",
            message=f"waiting behind job-{name}-helper",
            computed_at=now,
        )
    WorkloadEvent.objects.create(
        workload=WorkloadRecord.objects.get(name="job-fix-eval"),
        type="preempted",
        at=now,
        reason="InClusterQueue",
        details={"preemptor": "serving/job-secret-launch"},
    )


def page(org: Org, who: str) -> str:
    client = Client()
    client.force_login(org.users[who])
    response = client.get("/queues/urgent/")
    assert response.status_code == 200
    return response.content.decode()


def test_a_member_sees_another_teams_workloads_only_as_theirs(org: Org) -> None:
    urgent_line()
    html = page(org, "alice")  # research
    assert "research/job-fix-eval" in html and "waiting behind job-fix-eval-helper" in html
    assert "secret-launch" not in html  # not its name, message or the preemption's
    assert "a workload of team serving" in html
    assert html.count("8 GPUs") == 2  # both places in line, with their sizes


def test_an_admin_sees_every_workload(org: Org) -> None:
    urgent_line()
    html = page(org, "admin")
    assert "serving/job-secret-launch" in html and "by serving/job-secret-launch" in html
    assert "a workload of team" not in html
