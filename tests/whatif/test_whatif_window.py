"""What a window replay is made of, on PostgreSQL: runtimes (recorded, still
running, declared, the default; in the simulated cluster's time), the work
already running or queued when the window opens, recorded approval delays,
and waits censored at the window's end on both sides."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from cluster.models import EventType, WorkloadEvent, WorkloadRecord
from cluster.models import WorkloadState as W
from jobs.models import JobRequest
from queues.models import Team
from tests.jobs.conftest import GPU, Org, org
from tests.whatif.test_whatif_task import congested, queue_row, raise_research, recorded
from whatif import runs as whatif_runs
from whatif import service as whatif
from whatif.stream import recorded_stream

__all__ = ["congested", "org"]

HOUR = 3600
NOW = timezone.now().replace(microsecond=0)
START = NOW - timedelta(hours=3)


def prepared(end: datetime = NOW, start: datetime = START) -> Any:
    return whatif_runs.prepare(
        source="window", changes=whatif_runs.parse_changes(raise_research()),
        window_start=start, window_end=end,
    )  # fmt: skip


def runtimes(stream: Any) -> dict[str, float | None]:
    return {w.name: w.runtime for w, _ in stream.build()}


def declare(row: WorkloadRecord, **fields: Any) -> None:
    JobRequest.objects.create(
        name=row.name,
        team=Team.objects.get(slug=row.namespace),
        namespace=row.namespace,
        image="registry.example.com/x:1",
        local_queue="training-large",
        cluster_queue=row.cluster_queue,
        submitted_at=row.created_at,
        workload=row,
        **fields,
    )


def test_runtimes_come_from_the_records_in_the_clusters_own_time(org: Org, settings: Any) -> None:
    recorded("research", "done", created=START, runtime=600)
    recorded("research", "running", created=START + timedelta(minutes=10), runtime=None)
    declared = recorded("research", "queued", created=START, admitted=False)
    declare(declared, expected_runtime_seconds=1800, checkpoint_interval_seconds=600)
    recorded("research", "unknown", created=START, admitted=False)
    gone = recorded("research", "deleted", created=START, runtime=None)
    WorkloadRecord.objects.filter(pk=gone.pk).update(state=W.DELETED)
    WorkloadRecord.objects.filter(pk=gone.pk).update(synced_at=START + timedelta(minutes=5))
    policy = prepared().today
    # The simulated cluster does 60 s of a job's declared work per second.
    stream = recorded_stream(START, NOW, policy, observed=NOW, speedup=60)
    times = runtimes(stream)
    assert times["done"] == 600  # finished − admitted, as sync saw it
    assert times["running"] == 2 * HOUR + 50 * 60  # still running: at least as long as so far
    # Declared work and the default hour, 60 times faster.
    assert times["queued"] == 30 and times["unknown"] == 60
    assert times["deleted"] == 300  # deleted while it ran: until its deletion
    checkpoints = {w.name: w.checkpoint_interval for w, _ in stream.build()}
    assert checkpoints["queued"] == 10
    assert stream.runtime_sources == {"recorded": 2, "running": 1, "job": 1, "default": 1}
    assert any("60× faster" in note for note in stream.notes)
    real = recorded_stream(START, NOW, policy, observed=NOW)  # a real cluster: as declared
    assert runtimes(real)["queued"] == 1800 and runtimes(real)["unknown"] == HOUR
    assert not any("faster" in note for note in real.notes)
    # How each cluster runs, from the settings.
    settings.BERTH_CLUSTER, settings.BERTH_SIMULATED_SPEEDUP = "simulated", 60
    assert whatif_runs.cluster_pace()[:3] == (60.0, 0.0, 0.0)
    simulated = prepared().stream()
    assert (simulated.eviction_delay, simulated.requeue_delay) == (0.0, 0.0)
    assert runtimes(simulated)["queued"] == 30
    settings.BERTH_CLUSTER = "kubernetes"
    assert whatif_runs.cluster_pace()[:3] == (1.0, 30.0, 1.0)


def test_work_running_when_the_window_opens_holds_its_quota_but_is_not_counted(org: Org) -> None:
    # An 8-GPU job in research's 16 + 8: two more fit beside it, the fourth waits.
    before = START - timedelta(hours=1)
    old = recorded("research", "old", created=before, runtime=2 * HOUR)
    WorkloadRecord.objects.filter(pk=old.pk).update(flavors={"main": {GPU: "h100"}})
    WorkloadEvent.objects.create(workload=old, type=EventType.ADMITTED, at=before)
    WorkloadEvent.objects.create(workload=old, type=EventType.FINISHED, at=old.finished_at)
    queued = recorded("research", "queued", created=before, runtime=HOUR)
    WorkloadRecord.objects.filter(pk=queued.pk).update(
        admitted_at=START, finished_at=START + timedelta(hours=1)
    )
    WorkloadEvent.objects.create(workload=queued, type=EventType.ADMITTED, at=START)
    for i in range(3):
        recorded("research", f"new-{i}", created=START + timedelta(minutes=1 + i))
    stream = prepared().stream()
    assert stream.count == 3 and len(stream.context) == 2
    result = whatif.compare(*_policies(), stream)
    research = queue_row(result, "research")["today"]
    assert research["workloads"] == 3  # old and queued set the scene only
    # old holds 8 GPUs until an hour into the window, queued takes 8 at once:
    # new-0 fits, new-1 and new-2 wait for old (then for queued).
    assert research["max_wait"] == pytest.approx(HOUR - 2 * 60, abs=5)


def _policies() -> tuple[Any, Any]:
    prepared_run = prepared()
    return prepared_run.today, prepared_run.proposal


def test_recorded_approval_delays_are_replayed(org: Org) -> None:
    row = recorded("research", "approved", created=START, runtime=HOUR)
    WorkloadRecord.objects.filter(pk=row.pk).update(
        admission_checks={"urgent": {"state": "Ready"}},
        admitted_at=START + timedelta(minutes=20),
        finished_at=START + timedelta(minutes=80),
    )
    WorkloadEvent.objects.create(workload=row, type=EventType.QUOTA_RESERVED, at=START)
    WorkloadEvent.objects.create(
        workload=row, type=EventType.ADMITTED, at=START + timedelta(minutes=20)
    )
    waiting = recorded("research", "waiting", created=START, admitted=False)
    WorkloadRecord.objects.filter(pk=waiting.pk).update(
        admission_checks={"urgent": {"state": "Pending"}}, state=W.QUOTA_RESERVED
    )
    WorkloadEvent.objects.create(workload=waiting, type=EventType.QUOTA_RESERVED, at=START)
    stream = recorded_stream(START, NOW, prepared().today, observed=NOW)
    assert stream.check_delays == {"research/approved": 20 * 60, "research/waiting": math.inf}
    assert any("1 still unanswered" in note for note in stream.notes)


def test_waits_are_censored_at_the_windows_end_on_both_sides(
    org: Org, congested: dict[str, datetime]
) -> None:
    """Twelve 8-GPU jobs of an hour in a 3 h window, three at a time today:
    the fourth wave is not admitted by the window's end."""
    run = prepared(end=congested["end"], start=congested["start"])
    result = whatif.compare(run.today, run.proposal, run.stream())
    research = queue_row(result, "research")
    today, proposal = research["today"], research["proposal"]
    assert today["never_admitted"] == 3 and proposal["never_admitted"] == 0
    assert today["max_wait"] == pytest.approx(3 * HOUR, abs=20)  # until the end, at least
    assert set(today["waits_at_least"]) == {"avg_wait", "p95_wait", "max_wait"}
    assert proposal["waits_at_least"] == []
    assert result["totals"]["today"]["never_admitted"] == 3
    # What sync recorded for the same workloads: each admitted as it was created.
    assert research["recorded"]["p95_wait"] == 0 and research["recorded"]["never_admitted"] == 0
    assert result["totals"]["today"]["simulated_hours"] == pytest.approx(3, abs=0.01)
