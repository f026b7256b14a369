"""The grant's what-if: asked for over a day of recorded load, the run
replays it under today's policy and with the grant, and the grant shows what
that says about each queue's waits (the granted queue waits less here)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.test import Client
from django.utils import timezone

from cluster.models import WorkloadRecord, WorkloadState
from tests.grants.conftest import ask
from tests.jobs.conftest import Org

GPU = "nvidia.com/gpu"


def recorded(queue: str, name: str, created: Any) -> None:
    """An 8-GPU workload that ran an hour from ``created``."""
    WorkloadRecord.objects.create(
        uid=f"uid-{queue}-{name}", namespace=queue, name=name, cluster_queue=queue,
        local_queue=queue, priority=1000, priority_class="train-low", requested={GPU: 8},
        pod_sets=[{"name": "main", "count": 1, "requests": {GPU: 8}}],
        state=WorkloadState.FINISHED, created_at=created, admitted_at=created,
        finished_at=created + timedelta(hours=1),
    )  # fmt: skip


def test_the_whatif_says_how_waits_change_with_the_grant(
    org: Org, carol: Any, django_capture_on_commit_callbacks: Any
) -> None:
    start = timezone.now().replace(microsecond=0) - timedelta(hours=5)
    for i in range(12):  # research may hold 16 + 8 borrowed: three at a time today
        recorded("research", f"train-{i}", start + timedelta(seconds=i))
    recorded("serving", "batch", start + timedelta(minutes=1))
    with django_capture_on_commit_callbacks(execute=True):  # the run, eagerly
        created = org.alice.post("/api/v1/quota-grants/", ask(), format="json")
    assert created.status_code == 201, created.content
    grant = org.alice.get(f"/api/v1/quota-grants/{created.json()['id']}/").json()
    whatif = grant["whatif"]
    assert whatif["run"] == grant["whatif_run"] and whatif["state"] == "succeeded", whatif
    queues = {q["cluster_queue"]: q for q in whatif["queues"]}
    research, serving = queues["research"], queues["serving"]
    assert research["granted"] is True and serving["granted"] is False
    # +16 nominal: five at a time instead of three, so research waits less.
    assert research["p95_wait_with_grant"] < research["p95_wait_today"]
    assert serving["p95_wait_today"] is not None

    client = Client()
    client.force_login(carol)
    html = client.get(f"/grants/{grant['id']}/").content.decode()
    assert 'id="whatif-table"' in html and 'data-queue="serving"' in html
    assert f'href="/whatif/{whatif["run"]}/"' not in html  # the run's page is admins'
