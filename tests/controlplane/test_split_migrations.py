"""Splitting jobs/ into jobs, cluster, approvals and whatif moved models
between apps without touching a table: a database migrated before the split,
with rows in it, migrates across it and every row is still there, read by the
models in their new apps."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from approvals.models import ApprovalRequest
from cluster.models import WorkloadEvent, WorkloadRecord
from jobs.models import JobRequest
from queues.models import Team
from whatif.models import WhatIfRun

BEFORE_THE_SPLIT = [
    ("jobs", "0014_observed_nodes"),
    ("cluster", None),
    ("approvals", None),
    ("whatif", None),
]


def _tables() -> set[str]:
    with connection.cursor() as cursor:
        return set(connection.introspection.table_names(cursor))


@pytest.mark.django_db(transaction=True)
def test_rows_written_before_the_split_are_read_after_it() -> None:
    tables = _tables()
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE_THE_SPLIT)
    old = executor.loader.project_state([BEFORE_THE_SPLIT[0]]).apps

    def model(name: str) -> Any:
        return old.get_model("jobs", name)

    team = old.get_model("queues", "Team").objects.create(slug="research", name="Research")
    now = timezone.now()
    workload = model("WorkloadRecord").objects.create(
        uid="u-1", namespace="team-research", name="job-a", created_at=now, team_id=team.pk
    )
    model("WorkloadEvent").objects.create(workload=workload, type="Created", at=now)
    job = model("JobRequest").objects.create(
        name="a", team_id=team.pk, namespace="team-research", image="busybox",
        local_queue="research", cluster_queue="research", workload=workload, submitted_at=now,
    )  # fmt: skip
    model("ApprovalRequest").objects.create(
        job=job, workload_uid="u-1", workload_name="job-a", namespace="team-research",
        cluster_queue="urgent-release", created_at=now, expires_at=now,
    )  # fmt: skip
    model("WhatIfRun").objects.create(window_start=now, window_end=now)

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert _tables() == tables  # nothing created, dropped or renamed
    moved = JobRequest.objects.select_related("workload", "team").get(name="a")
    assert moved.team == Team.objects.get(slug="research")
    assert moved.workload == WorkloadRecord.objects.get(uid="u-1")
    assert WorkloadEvent.objects.get().workload_id == moved.workload_id
    assert ApprovalRequest.objects.get().job_id == moved.pk
    assert WhatIfRun.objects.count() == 1
