"""What the job page and the team page's preview write: words and durations,
never an ISO timestamp, a Go struct or a reason repeated by its message."""

from __future__ import annotations

import re
from typing import Any

from django.test import Client
from django.utils import timezone

from cluster.models import PendingForecast, WorkloadEvent, WorkloadRecord
from jobs.models import JobRequest
from tests.jobs.conftest import Org, job, org

__all__ = ["org"]
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")


def browser(org: Org) -> Client:
    client = Client()
    client.force_login(org.users["alice"])
    return client


def visible(html: str) -> str:
    """The page's text, without tags, scripts or attribute values."""
    html = re.sub(r"<script.*?</script>", "", html, flags=re.S)
    return re.sub(r"<[^>]+>", " ", html)


def test_the_job_page_says_what_happens_now_and_when_it_may_start(
    org: Org, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):  # created on the cluster
        response = org.alice.post("/api/v1/jobs/", job(), format="json")
    page = browser(org).get(f"/jobs/{response.json()['id']}/").content.decode()
    words = visible(page)
    assert "Created created" not in words
    assert "Created on the cluster; waiting for Kueue" in words
    assert "unknown – unknown" not in words
    assert "Estimated start:" in words
    assert not ISO.search(words)


def test_kueues_messages_write_taints_as_kubectl_does(org: Org) -> None:
    """Kueue prints a taint as a Go struct in its conditions (and so does the
    engine, to agree with it): the pages rewrite it."""
    go = "untolerated taint {capacity spot NoSchedule <nil>} in flavor h100-spot"
    response = org.alice.post("/api/v1/jobs/", job(), format="json")
    record = WorkloadRecord.objects.create(
        uid="uid-1", namespace="research", name="job-qwen-sft-1", cluster_queue="research",
        state="pending", message=f"couldn't assign flavors to pod set main: {go}",
        created_at=timezone.now(),
    )  # fmt: skip
    WorkloadEvent.objects.create(
        workload=record, type="created", at=timezone.now(), reason="Pending", message=go
    )
    PendingForecast.objects.create(
        workload=record, cluster_queue="research", position=1, reason="Pending",
        message=go, computed_at=timezone.now(),
    )  # fmt: skip
    JobRequest.objects.filter(pk=response.json()["id"]).update(workload=record)
    for path in (f"/jobs/{response.json()['id']}/", "/queues/research/"):
        words = visible(browser(org).get(path).content.decode())
        assert "<nil>" not in words and "{capacity spot" not in words, path
        assert "capacity=spot:NoSchedule" in words, path


def test_the_team_preview_writes_its_start_estimate_in_words(org: Org) -> None:
    form: dict[str, Any] = {
        "name": "qwen-sft", "image": "registry.example.com/qwen:1", "queue": "research",
        "nodes": "1", "gpus_per_node": "8", "checkpoint_uri": "s3://b/q",
        "command": "python train.py", "preview": "1",
    }  # fmt: skip
    words = visible(browser(org).post("/teams/research/", form).content.decode())
    assert "estimated start:" in words
    assert not ISO.search(words)


def test_the_team_form_takes_runtimes_as_durations(org: Org) -> None:
    """Its runtime fields accept 2h or 90m as the API does (a number field
    would refuse them in the browser), and a posted 2h is stored as 7200 s."""
    page = browser(org).get("/teams/research/").content.decode()
    for name in ("max_runtime_seconds", "expected_runtime_seconds"):
        field = re.search(rf'<input name="{name}"[^>]*>', page)
        assert field is not None and 'type="text"' in field.group(0), name
    form = {
        "name": "qwen-sft", "image": "registry.example.com/qwen:1", "queue": "research",
        "nodes": "1", "gpus_per_node": "8", "checkpoint_uri": "s3://b/q",
        "command": "python train.py", "max_runtime_seconds": "2h", "submit": "1",
    }  # fmt: skip
    assert browser(org).post("/teams/research/", form).status_code == 302
    assert JobRequest.objects.get(name="qwen-sft").max_runtime_seconds == 7200


def test_the_preview_of_an_urgent_release_job_says_it_needs_approval(org: Org) -> None:
    form = {
        "name": "release-fix", "image": "registry.example.com/qwen:1", "queue": "urgent",
        "nodes": "1", "gpus_per_node": "8", "checkpoint_uri": "s3://b/q",
        "command": "python train.py", "justification": "release blocker", "preview": "1",
    }  # fmt: skip
    page = browser(org).post("/teams/research/", form).content.decode()
    assert 'id="preview-approval"' in page and "Needs approval." in page
    assert "4 h to decide" in page  # BERTH_APPROVAL_TIMEOUT, in words
    ordinary = browser(org).post("/teams/research/", {**form, "queue": "research"})
    assert 'id="preview-approval"' not in ordinary.content.decode()
    dry = org.alice.post(
        "/api/v1/jobs/?dry_run=true",
        {**job(name="release-fix", queue="urgent-release", nodes=1), "justification": "x"},
        format="json",
    )
    assert dry.status_code == 200 and dry.json()["needs_approval"] is True
