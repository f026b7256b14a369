"""The team page's numbers: quotas and use in readable units, and what each of
the team's queues can borrow *now*, per flavor its queue class may run on:
its borrowing limit less what it borrows, and no more than the cohort has idle."""

from __future__ import annotations

import re
from datetime import timedelta

from django.test import Client
from django.utils import timezone

from cluster.models import QueueSnapshot
from tests.factories import cluster_queue
from tests.jobs.conftest import Org, gpus, org

__all__ = ["org"]
GPU = "nvidia.com/gpu"


def page(org: Org, who: str = "alice") -> str:
    client = Client()
    client.force_login(org.users[who])
    response = client.get("/teams/research/")
    assert response.status_code == 200
    return response.content.decode()


START = timezone.now().replace(microsecond=0) - timedelta(minutes=10)


def snapshot(
    queue: str, flavor: str, nominal: int, usage: int, later: int = 0, **figures: int
) -> None:
    """A sync's snapshot of one queue × flavor; ``later``: that many syncs on."""
    QueueSnapshot.objects.create(
        at=START + timedelta(seconds=30 * later),
        cluster_queue=queue,
        flavor=flavor,
        resource=figures.pop("resource", GPU),  # type: ignore[arg-type]
        nominal=nominal,
        usage=usage,
        borrowed=max(0, usage - nominal),
        **figures,
    )


def offered(html: str, queue: str, flavor: str) -> int | None:
    found = re.search(rf'data-borrow="{queue}/{flavor}">(\d+)<', html)
    return int(found.group(1)) if found else None


def test_what_a_queue_can_borrow_now_subtracts_what_it_borrows_and_is_bounded_by_idle(
    org: Org,
) -> None:
    # research: 16 nominal, limit 8, uses 20 (borrows 4, from serving); the
    # cohort has 22 idle: its limit leaves 4.
    snapshot("research", "h100", 16, 20)
    snapshot("serving", "h100", 16, 6, lent=4)
    html = page(org)
    assert offered(html, "research", "h100") == 4
    assert "it borrows 4 of its limit of 8" in html
    assert "serving has 6 idle" in html  # 10 unused, 4 of them lent to research
    # The rest of the cohort busy: 2 GPUs idle anywhere, so 2 whatever the limit.
    snapshot("serving", "h100", 16, 12, later=1, lent=4)
    snapshot("research-dev", "h100", 8, 8, later=1)
    snapshot("urgent", "h100", 8, 6, later=1)
    html = page(org)
    assert offered(html, "research", "h100") == 2
    assert "urgent has 2 idle" in html and "serving has" not in html


def test_only_flavors_the_queue_class_may_run_on_are_offered(org: Org) -> None:
    # A training-large queue holding spot quota (the old demo's mistake) is not
    # offered spot; the eval-batch queue is.
    cluster_queue(
        "research-mixed",
        team="research",
        cohort="org",
        queue_class="training-large",
        resource_groups=gpus(("h100", "0"), ("h100-spot", "8"), borrowing_limit="8"),
    )
    html = page(org)
    assert offered(html, "research-mixed", "h100") is not None
    assert offered(html, "research-mixed", "h100-spot") is None
    assert "Not offered: h100-spot — research-mixed's queue class does not run on spot" in html
    assert offered(html, "research-eval", "h100-spot") is not None


def test_the_quota_table_shows_measured_amounts_in_readable_units(org: Org) -> None:
    snapshot("research", "h100", 16, 20)
    snapshot("research", "h100", 384_000, 200_000, resource="cpu", lent=117_091)
    snapshot("research", "h100", 4 * 2**40, 2**40, resource="memory", lent=1_341_071_000_545)
    html = page(org)
    table = html[html.index('id="team-quotas"') : html.index('id="team-borrowing"')]
    assert ">117<" in table and ">1.22Ti<" in table and ">4Ti<" in table
    assert "117091m" not in table and "1341071000545" not in table
