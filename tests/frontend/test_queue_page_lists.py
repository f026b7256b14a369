"""A queue page with a long pending line shows its head, how many there are
and a link to all of them, instead of pushing everything else off the page."""

from __future__ import annotations

from datetime import timedelta

from django.test import Client
from django.utils import timezone

from cluster.models import PendingForecast, WorkloadRecord
from tests.jobs.conftest import Org, org

__all__ = ["org"]


def line(length: int) -> None:
    now = timezone.now()
    for position in range(1, length + 1):
        workload = WorkloadRecord.objects.create(
            uid=f"uid-{position}",
            namespace="research",
            name=f"job-wait-{position}",
            cluster_queue="research",
            state="pending",
            requested={"nvidia.com/gpu": 8},
            created_at=now - timedelta(minutes=position),
        )
        PendingForecast.objects.create(
            workload=workload,
            cluster_queue="research",
            position=position,
            reason="Pending",
            message="waiting for quota",
            computed_at=now,
        )


def page(org: Org, query: str = "") -> str:
    client = Client()
    client.force_login(org.users["alice"])
    response = client.get(f"/queues/research/{query}")
    assert response.status_code == 200
    return response.content.decode()


def test_a_long_line_shows_its_head_with_a_count_and_a_link_to_all(org: Org) -> None:
    line(56)
    html = page(org)
    section = html[html.index('id="pending"') : html.index('id="pending-count"') + 400]
    assert section.count("job-wait-") == 10
    assert "research/job-wait-1\n" in section and "job-wait-11\n" not in section
    assert "The first 10 of 56 pending workloads" in section
    assert 'href="?pending=all#pending">Show all 56' in section
    every = page(org, "?pending=all")
    assert every.count("job-wait-") == 56 and "All 56 pending workloads" in every


def test_a_short_line_is_shown_whole_without_a_link(org: Org) -> None:
    line(3)
    html = page(org)
    assert html.count("job-wait-") == 3 and "Show all" not in html
