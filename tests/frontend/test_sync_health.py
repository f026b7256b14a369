"""The Overview's cluster sync card, in words: each step working, failing (how
many runs in a row, the error, when it last succeeded), late (it stopped
running) or not run yet; and the job page saying why a job is not (or still)
on the cluster. The real failures behind these rows are made on a real API
server in tests/cluster/test_sync_steps.py and tests/jobs/test_cluster_errors.py."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.test import Client
from django.utils import timezone

from cluster.models import SyncStepHealth, SyncStepName
from cluster.sync_steps import record
from jobs.models import JobRequest, JobState
from tests.jobs.conftest import Org, job, org

__all__ = ["org"]


def card(org: Org) -> str:
    browser = Client()
    browser.force_login(org.users["alice"])
    response = browser.get("/")
    assert response.status_code == 200
    html = response.content.decode()
    start = html.index('id="sync-health"')
    return html[start : html.index('<div class="card"', start)]


def row(html: str, step: str) -> str:
    start = html.index(f'data-sync-step="{step}"')
    return html[start : html.index("</tr>", start)]


def test_before_the_first_sync_every_step_is_not_run_yet(org: Org) -> None:
    html = card(org)
    assert "Not synced yet" in html
    assert html.count("not run yet") == len(SyncStepName)


def test_failing_late_and_working_steps_in_words(org: Org, settings: Any) -> None:
    settings.BERTH_SYNC_INTERVAL = 30
    now = timezone.now()
    for step in SyncStepName:
        record(step, now, 0.2, None)
    for _ in range(3):
        record(SyncStepName.QUEUE_STATUS, now, 0.1, "list clusterqueues: 503 etcd <leader> changed")
    SyncStepHealth.objects.filter(step="snapshots").update(
        last_run_at=now - timedelta(hours=2), last_success_at=now - timedelta(hours=2)
    )
    html = card(org)
    assert "Not keeping up: queue status mirrored, usage and capacity snapshots." in html
    failing = row(html, "queue_status")
    assert 'class="bad">failing</strong>: failed its last 3 runs' in failing
    assert "just now" in failing  # it succeeded once, a moment ago
    assert "list clusterqueues: 503 etcd &lt;leader&gt; changed" in html  # escaped
    late = row(html, "snapshots")
    assert "late</strong>: it has not run for a while" in late and "2 h ago" in late
    assert 'class="good">working</strong>' in row(html, "workloads")
    assert "consecutive" not in html and "failures_total" not in html


def test_the_job_page_says_why_a_job_is_not_on_the_cluster_yet(org: Org) -> None:
    response = org.alice.post("/api/v1/jobs/", job(kind="JobSet"), format="json")
    job_id = response.json()["id"]
    message = "attempt 2 of 20 to create it on the cluster failed; Berth tries again: 503"
    JobRequest.objects.filter(pk=job_id).update(reason="CreateRetrying", message=message)
    browser = Client()
    browser.force_login(org.users["alice"])
    html = browser.get(f"/jobs/{job_id}/").content.decode()
    assert 'id="job-cluster-error"' in html and "Not on the cluster yet." in html
    assert message in html and 'id="job-rejected"' not in html
    JobRequest.objects.filter(pk=job_id).update(state=JobState.REJECTED, reason="", message="")
    html = browser.get(f"/jobs/{job_id}/").content.decode()
    assert "<strong>Rejected.</strong> No reason was given." in html
