"""The embedded mode's loop (controlplane.embedded.EmbeddedLoop.run_once) on the demo
organisation and the simulated cluster: reconcile when the policy changed (or
the interval passed), step the cluster (demo load included), sync what it did.
And the Celery tasks that do the same work with a broker, called eagerly."""

from __future__ import annotations

import threading
import time
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from cluster.models import (
    CapacitySnapshot,
    PendingForecast,
    QueueSnapshot,
    QueueStatus,
    SyncCursor,
    WorkloadRecord,
    WorkloadState,
)
from cluster.tasks import sync_cluster
from controlplane.embedded import EmbeddedLoop
from queues import services
from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from queues.locks import try_lock
from queues.models import ReconcileRun, SimulatedClock, Team, TeamFairness
from queues.reconcile import applied_policy_version, policy_version
from queues.simulation.runner import MAX_LOAD_GAP, TICK_LOCK
from queues.tasks import step_simulated_cluster, sweep_reconcile

pytestmark = pytest.mark.django_db
DEMO_QUEUES = {"research", "serving", "platform", "urgent-release"}
TEAMS = {"research", "serving", "platform"}


@pytest.fixture
def demo(db: Any, settings: Any) -> None:
    settings.BERTH_RECONCILE_RETRY_BASE = 0.001
    settings.BERTH_DEMO_LOAD = False
    call_command("seed_demo", "--quiet-logins", stdout=StringIO())


def listed(kind: str) -> list[dict[str, Any]]:
    return SimulatedBackend().list(TYPES[kind])[0]


def names(kind: str) -> set[str]:
    return {o["metadata"]["name"] for o in listed(kind)}


def periodic_runs() -> list[ReconcileRun]:
    return list(ReconcileRun.objects.filter(trigger=ReconcileRun.Trigger.PERIODIC).order_by("pk"))


def a_minute_has_passed() -> None:
    """Pretend the last step was long enough ago for the load generator to
    cover its maximum gap (a simulated hour at the default speed-up)."""
    SimulatedClock.objects.filter(pk=1).update(last_tick=time.time() - MAX_LOAD_GAP)


def test_first_run_reconciles_steps_and_syncs(demo: None) -> None:
    assert names("ClusterQueue") == set()  # seeding alone touches no cluster
    before = time.time()
    EmbeddedLoop().run_once()

    [run] = periodic_runs()
    assert run.status == ReconcileRun.Status.SUCCEEDED, run.errors
    assert run.policy_version == policy_version() == applied_policy_version()
    assert run.created == run.write_calls > 0
    assert names("ClusterQueue") == DEMO_QUEUES
    assert names("ResourceFlavor") == {"h100-ondemand", "h100-spot"}
    assert names("Cohort") == {"ai-shared"}
    assert names("Namespace") >= TEAMS
    # The step: the clock moved to now and nodes back the GPU quota.
    clock = SimulatedClock.objects.get(pk=1)
    assert clock.last_tick is not None and clock.last_tick >= before
    nodes = listed("Node")
    assert nodes
    gpus = sum(int(n["status"]["allocatable"].get("nvidia.com/gpu", 0)) for n in nodes)
    assert gpus == 64
    # The sync: a cursor, and one snapshot of queues and capacity.
    assert SyncCursor.objects.filter(kind="Workload").exists()
    assert set(QueueSnapshot.objects.values_list("cluster_queue", flat=True)) == DEMO_QUEUES
    assert set(CapacitySnapshot.objects.values_list("flavor", flat=True)) == {
        "h100-ondemand",
        "h100-spot",
    }
    # No load: nothing runs, nothing to record.
    assert listed("Job") == [] and not WorkloadRecord.objects.exists()
    # With no Celery beat, the loop evaluates every team's fair share itself.
    evaluated = TeamFairness.objects.filter(evaluated_at__isnull=False)
    assert set(evaluated.values_list("team__slug", flat=True)) == set(
        Team.objects.values_list("slug", flat=True)
    )


def test_demo_load_creates_jobs_that_become_synced_workloads(demo: None, settings: Any) -> None:
    settings.BERTH_DEMO_LOAD = True
    loop = EmbeddedLoop()
    loop.run_once()
    assert listed("Job") == []  # a first step has no elapsed time to fill

    a_minute_has_passed()
    loop.run_once()
    jobs, workloads = listed("Job"), listed("Workload")
    assert jobs, "an hour of simulated demo load created no job"
    assert len(workloads) == len(jobs)
    assert {j["metadata"]["namespace"] for j in jobs} <= TEAMS
    records = {r.uid: r for r in WorkloadRecord.objects.select_related("team")}
    assert set(records) == {w["metadata"]["uid"] for w in workloads}
    for record in records.values():
        assert record.team is not None and record.team.slug == record.namespace
        # The team's own queue, or now and then the shared urgent one.
        assert record.local_queue in (record.namespace, "urgent-release")
        assert record.requested.get("nvidia.com/gpu", 0) >= 1
    assert any(r.state == WorkloadState.ADMITTED for r in records.values())
    assert len(periodic_runs()) == 1  # the policy did not change: no second reconcile


def test_no_second_reconcile_until_the_policy_changes_or_the_interval_passes(
    demo: None, settings: Any
) -> None:
    loop = EmbeddedLoop()
    loop.run_once()
    loop.run_once()
    loop.run_once()
    assert len(periodic_runs()) == 1

    loop.last_reconcile = time.monotonic() - settings.BERTH_RECONCILE_INTERVAL - 1
    loop.run_once()
    first, again = periodic_runs()
    assert first.created > 0
    assert (again.status, again.write_calls) == (ReconcileRun.Status.SUCCEEDED, 0)
    assert again.message == "in sync: nothing to change"
    loop.run_once()
    assert len(periodic_runs()) == 2


def test_a_policy_change_is_reconciled_at_the_next_run(demo: None) -> None:
    loop = EmbeddedLoop()
    loop.run_once()
    services.resource_flavors.create(actor=None, data={"name": "a100"})
    assert policy_version() != applied_policy_version()
    loop.run_once()
    first, second = periodic_runs()
    assert first.policy_version < second.policy_version
    assert [(c["action"], c["kind"], c["name"]) for c in second.changes] == [
        ("create", "ResourceFlavor", "a100")
    ]
    assert second.policy_version == policy_version() == applied_policy_version()
    assert "a100" in names("ResourceFlavor")
    loop.run_once()
    assert len(periodic_runs()) == 2


@pytest.mark.django_db(transaction=True)
def test_the_thread_reconciles_steps_and_stops(settings: Any) -> None:
    """run() in its own thread (and database connection), as ``make run`` starts it."""
    settings.BERTH_RECONCILE_RETRY_BASE = 0.001
    settings.BERTH_RECONCILE_ON_CHANGE = False  # only the loop reconciles here
    services.resource_flavors.create(actor=None, data={"name": "h100"})
    loop = EmbeddedLoop(interval=0.05)
    loop.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
            periodic_runs() and SimulatedClock.objects.filter(last_tick__isnull=False).exists()
        ):
            time.sleep(0.05)
    finally:
        loop.stop()
        loop.join(timeout=30)
    assert not loop.is_alive()
    [run] = periodic_runs()
    assert run.status == ReconcileRun.Status.SUCCEEDED
    assert names("ResourceFlavor") == {"h100"}
    assert SimulatedClock.objects.get(pk=1).last_tick is not None


# --- the Celery tasks, eagerly ----------------------------------------------------


def test_step_task_steps_the_simulated_cluster(demo: None) -> None:
    EmbeddedLoop().run_once()
    last = SimulatedClock.objects.get(pk=1).last_tick
    assert last is not None
    assert step_simulated_cluster.delay().get() is True
    stepped = SimulatedClock.objects.get(pk=1).last_tick
    assert stepped is not None and stepped > last


def test_step_task_is_a_no_op_while_another_worker_steps(demo: None) -> None:
    EmbeddedLoop().run_once()
    held, release = threading.Event(), threading.Event()

    def other_worker() -> None:
        try:
            with try_lock(TICK_LOCK) as taken:
                assert taken
                held.set()
                release.wait(30)
        finally:
            connection.close()

    other = threading.Thread(target=other_worker)
    other.start()
    try:
        assert held.wait(30)
        last = SimulatedClock.objects.get(pk=1).last_tick
        assert step_simulated_cluster.delay().get() is False
        assert SimulatedClock.objects.get(pk=1).last_tick == last
    finally:
        release.set()
        other.join()
    assert step_simulated_cluster.delay().get() is True


def test_sync_task_returns_the_resource_version_and_row_counts(demo: None, settings: Any) -> None:
    settings.BERTH_DEMO_LOAD = True
    EmbeddedLoop().run_once()
    a_minute_has_passed()
    assert step_simulated_cluster.delay().get() is True
    QueueSnapshot.objects.all().delete()
    CapacitySnapshot.objects.all().delete()
    WorkloadRecord.objects.all().delete()
    QueueStatus.objects.all().delete()

    result = sync_cluster.delay().get()

    workloads, version = SimulatedBackend().list(TYPES["Workload"])
    queues = len(SimulatedBackend().list(TYPES["ClusterQueue"])[0])
    local_queues = len(SimulatedBackend().list(TYPES["LocalQueue"])[0])
    assert result == {
        "forecasts": PendingForecast.objects.count(),
        "resource_version": version,
        "queue_statuses": queues + local_queues,
        "jobs": 0,  # the demo load's jobs are not Berth job requests
        "queues": QueueSnapshot.objects.count(),
        "capacity": CapacitySnapshot.objects.count(),
    }
    assert QueueStatus.objects.count() == queues + local_queues
    # Unchanged status is not written again.
    assert sync_cluster.delay().get()["queue_statuses"] == 0
    assert QueueSnapshot.objects.exists() and CapacitySnapshot.objects.exists()
    assert SyncCursor.objects.get(kind="Workload").resource_version == version
    assert workloads
    assert WorkloadRecord.objects.count() == len(workloads)
    assert set(WorkloadRecord.objects.values_list("team__slug", flat=True)) <= TEAMS
    assert Team.objects.filter(slug__in=TEAMS).count() == 3


def test_sweep_task_queues_a_reconcile_only_when_the_cluster_is_behind(demo: None) -> None:
    assert sweep_reconcile.delay().get() is True
    [recovery] = ReconcileRun.objects.filter(trigger=ReconcileRun.Trigger.RECOVERY)
    assert recovery.status == ReconcileRun.Status.SUCCEEDED
    assert names("ClusterQueue") == DEMO_QUEUES
    assert sweep_reconcile.delay().get() is False
    assert ReconcileRun.objects.count() == 1
