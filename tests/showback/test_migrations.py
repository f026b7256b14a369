"""Showback's migrations on a database with history in it: cluster 0002 opens
allocations for the workloads holding quota when it runs and adds the hourly
borrowing up by team; 0003 adds the daily rows up into their months and keeps
each team's borrowed and lent totals."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from cluster.models import OpenAllocation, TeamBorrowingRollup, TeamBorrowingTotal, UsageRollup

BEFORE = [("cluster", "0001_initial")]
DAILY = [("cluster", "0002_showback_rollups")]
GPU = "nvidia.com/gpu"


def at(text: str) -> datetime:
    return datetime.fromisoformat(f"2026-{text}:00").replace(tzinfo=UTC)


@pytest.mark.django_db(transaction=True)
def test_history_before_showback_is_carried_into_its_rollups() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    team = old.get_model("queues", "Team").objects.create(slug="research", name="Research")
    old.get_model("queues", "Team").objects.create(slug="serving", name="Serving")
    queues = old.get_model("queues", "ClusterQueue").objects
    queues.create(name="research", team_id=team.pk)
    queues.create(name="serving", team=old.get_model("queues", "Team").objects.get(slug="serving"))
    old.get_model("cluster", "WorkloadRecord").objects.create(
        uid="u-held", namespace="research", name="job-held", team_id=team.pk,
        cluster_queue="research", state="admitted", created_at=at("10-01T08:00"),
        reserved_at=at("10-01T09:00"), admitted_at=at("10-01T09:05"),
        pod_sets=[{"name": "main", "count": 2, "requests": {GPU: 4}}],
        flavors={"main": {GPU: "h100"}}, requested={GPU: 8},
    )  # fmt: skip
    borrowing = old.get_model("cluster", "BorrowingRollup").objects
    for hour, seconds in (("10-03T10:00", 3600.0), ("10-20T11:00", 1800.0)):
        borrowing.create(
            hour=at(hour), borrower="research", lender="serving", flavor="h100", gpu_seconds=seconds
        )

    executor = MigrationExecutor(connection)
    executor.migrate(DAILY)
    daily = executor.loader.project_state(DAILY).apps
    assert sorted(
        daily.get_model("cluster", "TeamBorrowingRollup").objects.values_list("day", "gpu_seconds")
    ) == [(date(2026, 10, 3), 3600.0), (date(2026, 10, 20), 1800.0)]
    daily.get_model("cluster", "UsageRollup").objects.create(
        day=date(2026, 10, 4), team="research", queue_class="", flavor="h100", price="2.49",
        gpu_seconds=7200.0, busy_gpu_seconds=3600.0, measured_gpu_seconds=7200.0,
        busy_source="prometheus",
    )  # fmt: skip
    daily.get_model("cluster", "UsageRollup").objects.create(
        day=date(2026, 10, 9), team="research", queue_class="", flavor="h100", price="2.49",
        gpu_seconds=3600.0,
    )  # fmt: skip

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    [held] = OpenAllocation.objects.all()
    assert (held.team, held.flavor, held.gpus, held.started_at, held.counted_until) == (
        "research",
        "h100",
        8,
        at("10-01T09:00"),  # from its reservation
        at("10-01T09:00"),
    )
    [pair] = TeamBorrowingRollup.objects.all()
    assert (pair.month, pair.borrower, pair.lender, pair.gpu_seconds) == (
        date(2026, 10, 1),
        "research",
        "serving",
        5400.0,
    )
    totals = {
        t.team: (t.borrowed_gpu_seconds, t.lent_gpu_seconds)
        for t in TeamBorrowingTotal.objects.all()
    }
    assert totals == {"research": (5400.0, 0.0), "serving": (0.0, 5400.0)}
    [month] = UsageRollup.objects.all()
    assert (month.month, month.gpu_seconds, month.busy_gpu_seconds, month.busy_source) == (
        date(2026, 10, 1),
        10800.0,
        3600.0,
        "prometheus",
    )
