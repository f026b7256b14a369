"""The jobs page and the Overview agree with the cluster: workloads Berth did
not submit (the demo load, kubectl) are visible as workloads, and each counter
says what it counts."""

from __future__ import annotations

from typing import Any

from django.test import Client
from django.utils import timezone

from cluster.models import QueueStatus, WorkloadRecord
from jobs.models import JobRequest
from queues.models import Team
from tests.jobs.conftest import Org, job, org

__all__ = ["org"]


def browser(org: Org, who: str) -> Client:
    client = Client()
    client.force_login(org.users[who])
    return client


def text(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return str(response.content.decode())


def workload(name: str, namespace: str = "research", state: str = "admitted") -> WorkloadRecord:
    return WorkloadRecord.objects.create(
        uid=f"uid-{name}",
        namespace=namespace,
        name=name,
        team=Team.objects.get(slug=namespace),
        job_kind="Job",
        job_name=name.removeprefix("job-"),
        cluster_queue=namespace,
        state=state,
        requested={"nvidia.com/gpu": 8},
        created_at=timezone.now(),
    )


def test_workloads_berth_did_not_submit_are_listed_with_their_team(org: Org) -> None:
    workload("job-demo-1a2b3c")  # the demo load's, or kubectl's
    response = org.alice.post("/api/v1/jobs/", job(), format="json")
    mine = workload("job-qwen-sft-x1y2z", state="pending")
    JobRequest.objects.filter(pk=response.json()["id"]).update(workload=mine)

    page = text(browser(org, "alice").get("/workloads/"))
    demo = page[page.index('data-workload="research/job-demo-1a2b3c"') :].split("</tr>")[0]
    assert "(not through Berth)" in demo and "Job demo-1a2b3c" in demo
    ours = page[page.index('data-workload="research/job-qwen-sft-x1y2z"') :].split("</tr>")[0]
    assert f'href="/jobs/{response.json()["id"]}/"' in ours
    other = text(browser(org, "alice").get("/workloads/?origin=other"))
    assert "job-demo-1a2b3c" in other and "job-qwen-sft-x1y2z" not in other
    assert "job-demo-1a2b3c" not in text(browser(org, "bob").get("/workloads/"))  # serving
    assert "job-demo-1a2b3c" in text(browser(org, "admin").get("/workloads/"))


def test_the_jobs_page_points_to_workloads_it_does_not_list(org: Org) -> None:
    workload("job-demo-1a2b3c")
    page = text(browser(org, "alice").get("/jobs/"))
    assert "No jobs submitted through Berth" in page
    assert "1 workload waiting or running in your teams' namespaces was not submitted" in page
    assert 'href="/workloads/?origin=other"' in page
    assert 'id="other-workloads"' not in text(browser(org, "bob").get("/jobs/"))


def test_the_overview_counts_every_workload_and_says_what_each_counter_counts(org: Org) -> None:
    now = timezone.now()
    for name, pending, admitted in (("research", 35, 2), ("serving", 0, 1)):
        QueueStatus.objects.create(
            kind="ClusterQueue", name=name, cluster_queue=name,
            pending_workloads=pending, admitted_workloads=admitted, observed_at=now,
        )  # fmt: skip
    page = text(browser(org, "alice").get("/"))
    assert 'data-figure-name="admitted">3<' in page
    assert 'workloads admitted <span class="muted">(every team, however submitted)' in page
    assert 'data-figure-name="pending">35<' in page
    assert "your teams' Berth jobs running" in page
