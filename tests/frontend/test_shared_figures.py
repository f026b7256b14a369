"""The overview's and the queue list's cluster-wide figures are built once and
shown to every viewer while nothing they come from moved (``frontend.shared_figures``);
a sync, a reconcile or a policy change shows at once, and the viewer's own
counts are never shared."""

from __future__ import annotations

import re
from typing import Any

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from cluster.models import SyncStepHealth, SyncStepName
from jobs.models import JobRequest, JobState
from tests.frontend.test_dashboard_pages import browser, cluster_figures, html
from tests.jobs.conftest import Org, job, org

__all__ = ["cluster_figures", "org"]


def capacity_reads(client: Client, path: str = "/") -> tuple[str, int]:
    with CaptureQueriesContext(connection) as captured:
        page = html(client.get(path))
    return page, sum('FROM "jobs_capacitysnapshot"' in q["sql"] for q in captured)


def sync_ran() -> None:
    SyncStepHealth.objects.update_or_create(
        step=SyncStepName.WORKLOADS, defaults={"last_run_at": timezone.now()}
    )


def test_a_second_viewer_gets_the_figures_without_building_them(
    org: Org, cluster_figures: None
) -> None:
    first, built = capacity_reads(browser(org, "admin"))
    second, reads = capacity_reads(browser(org, "alice"))
    assert built > 0 and reads == 0
    assert 'data-figure-name="gpus">48<' in first and 'data-figure-name="gpus">48<' in second


def test_a_sync_shows_at_once(org: Org, cluster_figures: None) -> None:
    capacity_reads(browser(org, "admin"))
    sync_ran()
    assert capacity_reads(browser(org, "admin"))[1] > 0


def test_with_zero_seconds_every_view_builds_them(
    org: Org, cluster_figures: None, settings: Any
) -> None:
    settings.BERTH_SHARED_FIGURES_SECONDS = 0
    capacity_reads(browser(org, "admin"))
    assert capacity_reads(browser(org, "admin"))[1] > 0


def test_each_viewer_counts_their_own_jobs(org: Org, cluster_figures: None) -> None:
    org.alice.post("/api/v1/jobs/", job(name="ours"), format="json")
    JobRequest.objects.update(state=JobState.RUNNING)

    def running(who: str) -> str:
        found = re.search(
            r'data-figure-name="running"><a [^>]*>(\d+)<', html(browser(org, who).get("/"))
        )
        assert found is not None
        return found.group(1)

    # The cluster's figures are shared; the counts are each viewer's.
    assert (running("alice"), running("bob"), running("admin")) == ("1", "0", "1")


def test_a_policy_change_shows_on_the_queue_list_at_once(org: Org) -> None:
    from queues import services

    assert "ml-infra" not in html(browser(org, "admin").get("/queues/"))
    services.teams.create(actor=None, data={"slug": "ml-infra", "name": "ML infra"})
    services.cluster_queues.create(
        actor=None,
        data={"name": "ml-infra", "team": "ml-infra", "queue_class": "training-large"},
    )
    assert "ml-infra" in html(browser(org, "admin").get("/queues/"))
