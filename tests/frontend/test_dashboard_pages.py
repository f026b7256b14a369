"""Dashboard pages on PostgreSQL, per role: what each shows, that the numbers
are the database's, and that another team's jobs stay invisible."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from cluster.models import (
    BUCKET_FIELDS,
    CapacitySnapshot,
    PreemptionRollup,
    QueueSnapshot,
    QueueStatus,
    WaitRollup,
)
from cluster.rollups import bucket_of
from jobs.models import JobRequest
from tests.jobs.conftest import Org, job, org

__all__ = ["org"]


def browser(org: Org, who: str) -> Client:
    client = Client()
    client.force_login(org.users[who])
    return client


def html(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return response.content.decode()


@pytest.fixture
def cluster_figures(org: Org) -> None:
    now = timezone.now().replace(microsecond=0)
    CapacitySnapshot.objects.create(
        at=now, flavor="h100", resource="nvidia.com/gpu", allocatable=48, largest_node=8, nodes=6
    )
    QueueSnapshot.objects.create(
        at=now, cluster_queue="research", flavor="h100", resource="nvidia.com/gpu",
        nominal=16, usage=20, borrowed=4, pending_workloads=3, admitted_workloads=2,
        utilised=13.5,
    )  # fmt: skip
    QueueSnapshot.objects.create(
        at=now, cluster_queue="serving", flavor="h100", resource="nvidia.com/gpu",
        nominal=16, usage=6, lent=4,
    )  # fmt: skip
    QueueStatus.objects.create(
        kind="ClusterQueue", name="research", cluster_queue="research",
        pending_workloads=3, admitted_workloads=2, observed_at=now,
    )  # fmt: skip
    buckets = {BUCKET_FIELDS[bucket_of(200)]: 9, BUCKET_FIELDS[bucket_of(5000)]: 1}
    WaitRollup.objects.create(
        cluster_queue="research", hour=now.replace(minute=0, second=0), admissions=10,
        wait_seconds_sum=6800, gpus_admitted=80, **buckets,
    )  # fmt: skip
    PreemptionRollup.objects.create(
        cluster_queue="research", hour=now.replace(minute=0, second=0), reason="InClusterQueue",
        count=2, gpu_seconds_interrupted=7200,
    )  # fmt: skip


PAGES = ["/", "/queues/", "/queues/research/", "/cohorts/", "/jobs/"]


@pytest.mark.parametrize("path", PAGES)
def test_anonymous_visitors_are_sent_to_sign_in(org: Org, path: str) -> None:
    response = Client().get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")


@pytest.mark.parametrize("who", ["alice", "bob", "admin"])
@pytest.mark.parametrize("path", PAGES)
def test_every_page_renders_for_every_role(org: Org, who: str, path: str) -> None:
    page = html(browser(org, who).get(path))
    assert "<h1>" in page
    assert "data-live" in page  # it updates itself


def test_the_overview_shows_the_databases_numbers(org: Org, cluster_figures: None) -> None:
    page = html(browser(org, "admin").get("/"))
    assert 'data-figure-name="gpus">48<' in page
    assert 'data-figure-name="allocated">26<' in page  # 20 + 6
    assert "chart-capacity-now" in page and "data-figure=" in page
    assert "InClusterQueue" in page  # the preemption table fallback
    assert "/vendor/plotly-" in page  # plotly.js from the package, not a CDN
    # Scripts and stylesheets come from this origin. (Searching the page for
    # "cdn" was flaky: the random CSRF token spelt it now and then.)
    loaded = re.findall(r'<(?:script|link)\b[^>]*\b(?:src|href)="([^"]+)"', page)
    assert loaded and all(not url.startswith(("http:", "https:", "//")) for url in loaded), loaded


def test_an_empty_cluster_says_what_to_do_next(org: Org) -> None:
    page = html(browser(org, "alice").get("/"))
    assert "No nodes synced yet" in page
    assert "Nothing is pending" in page


def test_the_queue_list_has_usage_borrowing_and_waits(org: Org, cluster_figures: None) -> None:
    page = html(browser(org, "bob").get("/queues/"))
    row = page[page.index('data-queue="research"') :]
    row = row[: row.index("</tr>")]
    assert ">20<" in row and ">4<" in row  # usage, borrowed
    assert 'data-col="pending">3<' in row
    assert 'data-col="utilised">13.5<' in row
    assert "min" in row  # p50/p95 as durations
    assert ">2<" in row  # preemptions in 7 d
    sorted_page = html(browser(org, "bob").get("/queues/?sort=-usage"))
    assert sorted_page.index('data-queue="research"') < sorted_page.index('data-queue="serving"')


def test_the_queue_page_shows_quota_waits_and_its_kueue_yaml(
    org: Org, cluster_figures: None
) -> None:
    page = html(browser(org, "alice").get("/queues/research/"))
    assert "ClusterQueue research" in page
    assert "chart-quota" in page and "chart-waits" in page
    assert "kind: ClusterQueue" in page and "name: research" in page
    assert "InClusterQueue" in page
    assert browser(org, "alice").get("/queues/no-such-queue/").status_code == 404


def test_jobs_are_visible_to_their_team_and_admins_only(org: Org) -> None:
    response = org.alice.post("/api/v1/jobs/", job(), format="json")
    job_id = response.json()["id"]
    assert 'data-job="qwen-sft"' in html(browser(org, "alice").get("/jobs/"))
    assert 'data-job="qwen-sft"' in html(browser(org, "admin").get("/jobs/"))
    assert 'data-job="qwen-sft"' not in html(browser(org, "bob").get("/jobs/"))
    assert browser(org, "bob").get(f"/jobs/{job_id}/").status_code == 404
    detail = html(browser(org, "alice").get(f"/jobs/{job_id}/"))
    assert "Job qwen-sft" in detail and "kind: Job" in detail  # the manifest
    assert "chart-timeline" in detail
    assert "Why it waits" in detail  # submitted, not yet admitted: the engine's answer


def test_the_job_list_filters_and_paginates(org: Org) -> None:
    for index in range(3):
        org.alice.post("/api/v1/jobs/", job(name=f"eval-{index}", queue="eval-batch", nodes=1),
                       format="json")  # fmt: skip
    org.alice.post("/api/v1/jobs/", job(), format="json")
    JobRequest.objects.filter(name="eval-0").update(state="running")
    alice = browser(org, "alice")
    running = html(alice.get("/jobs/?state=running"))
    assert 'data-job="eval-0"' in running and 'data-job="eval-1"' not in running
    queue = html(alice.get("/jobs/?queue=research"))
    assert 'data-job="qwen-sft"' in queue and 'data-job="eval-1"' not in queue
    assert "4 job(s)" in html(alice.get("/jobs/"))


def live_parts(page: str) -> dict[str, str]:
    """The page's parts live.js swaps in (elements with ``data-live``), by id."""
    tags = re.findall(r"<[a-z]+\b[^>]*\bdata-live(?!-)\b[^>]*>", page)
    ids = [re.search(r'\bid="([^"]+)"', tag) for tag in tags]
    assert all(ids), f"a live part without an id cannot be swapped: {tags}"
    return {found.group(1): tag for found, tag in zip(ids, tags, strict=True) if found}


def test_a_live_refresh_answers_the_same_page(org: Org) -> None:
    client = browser(org, "alice")
    shown = html(client.get("/queues/"))
    refreshed = client.get("/queues/", HTTP_X_BERTH_LIVE="1")
    assert refreshed.status_code == 200
    # live.js finds every part it swaps, by id, in what the refresh answers.
    parts = live_parts(shown)
    assert parts and live_parts(html(refreshed)) == parts


def test_plotly_is_served_from_the_package_gzipped_and_cacheable(org: Org) -> None:
    client = browser(org, "alice")
    page = html(client.get("/queues/research/"))
    src = page[page.index("/vendor/plotly-") :].split('"')[0]
    zipped = client.get(src, HTTP_ACCEPT_ENCODING="gzip")
    assert zipped.status_code == 200 and zipped["Content-Encoding"] == "gzip"
    assert "immutable" in zipped["Cache-Control"]
    plain = client.get(src)
    assert plain.content.startswith(b"/**") or b"plotly" in plain.content[:2000].lower()


def test_a_team_page_shows_quotas_borrowing_and_jobs_to_its_members_only(
    org: Org, cluster_figures: None
) -> None:
    page = html(browser(org, "alice").get("/teams/research/"))
    assert "Quotas and use" in page and "research-eval" in page
    # research already borrows 4 of its limit of 8: 4 more now (the cohort has
    # 22 idle: serving 10, research-dev 8, urgent 8, less research's 4).
    assert 'data-borrow="research/h100">4<' in page
    assert "it borrows 4 of its limit of 8" in page
    assert "serving has 6 idle" in page  # 10 unused, 4 of them lent
    assert browser(org, "bob").get("/teams/research/").status_code == 404
    assert browser(org, "admin").get("/teams/research/").status_code == 200
    assert browser(org, "alice").get("/team/")["Location"] == "/teams/research/"


def test_the_team_form_previews_submits_and_refuses_like_the_api(org: Org) -> None:
    alice = browser(org, "alice")
    form = {
        "name": "qwen-sft", "image": "registry.example.com/qwen:1", "queue": "research",
        "nodes": "2", "gpus_per_node": "8", "checkpoint_uri": "s3://b/q",
        "command": "python train.py --config x.yaml",
    }  # fmt: skip
    preview = html(alice.post("/teams/research/", {**form, "preview": "1"}))
    assert "Lands in <strong>research</strong>" in preview and "Fits now" in preview
    assert JobRequest.objects.count() == 0
    refused = html(alice.post("/teams/research/", {**form, "checkpoint_uri": "", "submit": "1"}))
    assert "checkpoint-required" in refused and JobRequest.objects.count() == 0
    done = alice.post("/teams/research/", {**form, "submit": "1"})
    stored = JobRequest.objects.get()
    assert done.status_code == 302 and done["Location"] == f"/jobs/{stored.pk}/"
    assert stored.command == ["python", "train.py", "--config", "x.yaml"]


def test_the_cohort_page_shows_the_tree_the_balance_sheet_and_shares(org: Org) -> None:
    from cluster.models import BorrowingRollup, FairShareRollup

    hour = timezone.now().replace(minute=0, second=0, microsecond=0)
    BorrowingRollup.objects.create(
        hour=hour, borrower="research", lender="serving", flavor="h100", gpu_seconds=7200
    )
    BorrowingRollup.objects.create(
        hour=hour - timedelta(days=3), borrower="research", lender="serving", flavor="h100",
        gpu_seconds=3600,
    )  # fmt: skip
    FairShareRollup.objects.create(
        hour=hour, cluster_queue="research", cohort="org", share_sum=0.5, samples=2
    )
    page = html(browser(org, "bob").get("/cohorts/"))
    assert "<strong>org</strong>" in page and "research-eval" in page
    pair = page[page.index('data-pair="research:serving"') :].split("</tr>")[0]
    assert ">3<" in pair  # 2 h + 1 h within 7 d
    day = html(browser(org, "bob").get("/cohorts/?window=24h"))
    assert ">2<" in day[day.index('data-pair="research:serving"') :].split("</tr>")[0]
    assert "chart-balance" in page
    # One hour of shares is said to be too little to draw; two hours draw.
    assert "chart-shares" not in page and "One hourly sample so far" in page
    FairShareRollup.objects.create(
        hour=hour - timedelta(hours=1), cluster_queue="research", cohort="org",
        share_sum=0.25, samples=2,
    )  # fmt: skip
    assert "chart-shares" in html(browser(org, "bob").get("/cohorts/"))


def test_the_team_page_shows_its_gpus_allocated_and_busy(org: Org) -> None:
    from cluster.models import TeamUsageSnapshot
    from queues.models import Team

    TeamUsageSnapshot.objects.create(
        at=timezone.now(), team=Team.objects.get(slug="research"), allocated=12, utilised=8.5,
        utilisation_source="prometheus",
    )  # fmt: skip
    page = html(browser(org, "alice").get("/teams/research/"))
    assert "data-team-allocated>12<" in page and "data-team-busy>8.5<" in page
    assert "(DCGM)" in page
