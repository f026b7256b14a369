"""The what-if replays today's policy the way the cluster ran it: a window of
the embedded demo's load, recorded on the simulated cluster the way
``run_embedded`` records it (load generator, simulated Kueue at the demo's
speed-up, sync into WorkloadRecord/WorkloadEvent and the wait rollups), on a
virtual clock, then replayed under today's policy. Its waits per ClusterQueue
must agree with what sync recorded and with the dashboard's figures (the
hourly wait rollups, read by ``cluster.stats``) for the same window."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils import timezone

from cluster import stats
from cluster.models import WAIT_BUCKETS, EventType, WorkloadEvent, WorkloadRecord
from cluster.snapshots import record_nodes
from cluster.sync import watch_workloads
from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from queues.models import ReconcileRun
from queues.reconcile import reconcile
from queues.simulation.kueue import SimulatedKueue
from queues.simulation.load import generate
from queues.simulation.nodes import ensure_nodes
from whatif import service as whatif
from whatif.models import WhatIfState

pytestmark = pytest.mark.django_db

# BERTH_SIMULATED_TICK_MS=10000 (the demo steps every 2 s): a tenth of the
# steps to record. Both sides see the same steps, so agreement does not hang on it.
TICK = 10.0
SPEEDUP = 60.0  # BERTH_SIMULATED_SPEEDUP's default
# Five minutes of load first, so the window opens on a busy cluster; the window
# starts on the hour, as the dashboard's hourly rollups do.
WINDOW_START = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
WINDOW_END = WINDOW_START + timedelta(minutes=10)


@dataclass
class Clock:
    """Django's clock, moved by the test: the simulated backend stamps objects
    with it, sync and the what-if read it."""

    at: datetime

    def now(self) -> datetime:
        return self.at


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    virtual = Clock(WINDOW_START - timedelta(minutes=5))
    monkeypatch.setattr(timezone, "now", virtual.now)
    return virtual


@pytest.fixture
def demo(db: Any, settings: Any, clock: Clock) -> SimulatedBackend:
    settings.BERTH_RECONCILE_RETRY_BASE = 0.001
    settings.BERTH_DEMO_LOAD = False
    settings.BERTH_CLUSTER = "simulated"
    settings.BERTH_SIMULATED_SPEEDUP = SPEEDUP
    call_command("seed_demo", "--quiet-logins", stdout=StringIO())
    backend = SimulatedBackend()
    run = reconcile(backend, trigger=ReconcileRun.Trigger.MANUAL)
    assert run.status == "succeeded", run.errors
    ensure_nodes(backend)
    return backend


def record(backend: SimulatedBackend, clock: Clock, until: datetime, seed: int) -> None:
    """What the embedded loop does every tick until ``until``: the demo's load
    for the tick's worth of (sped-up) time, the simulated Kueue, then sync."""
    rng = random.Random(seed)
    kueue = SimulatedKueue(backend, SPEEDUP)
    while clock.at < until:
        clock.at += timedelta(seconds=TICK)
        now = clock.at.timestamp()
        generate(backend, now, TICK * SPEEDUP, rng)
        kueue.tick(now)
        backend.prune_log()
        watch_workloads(backend, timeout_seconds=0, rounds=1)
        record_nodes(backend.list(TYPES["Node"])[0], clock.at)


def recorded_waits(start: datetime, end: datetime) -> dict[str, list[tuple[float, bool]]]:
    """Per ClusterQueue, what sync recorded for the workloads created in the
    window: (wait, censored), from creation to the first Admitted event, or to
    the window's end for those never admitted by then."""
    first: dict[int, datetime] = {}
    events = WorkloadEvent.objects.filter(type=EventType.ADMITTED).order_by("at")
    for workload_id, at in events.values_list("workload_id", "at"):
        first.setdefault(workload_id, at)
    waits: dict[str, list[tuple[float, bool]]] = {}
    for row in WorkloadRecord.objects.filter(created_at__gte=start, created_at__lt=end):
        admitted = first.get(row.pk)
        if admitted is not None and admitted < end:
            waits.setdefault(row.cluster_queue, []).append(
                ((admitted - row.created_at).total_seconds(), False)
            )
        else:
            waits.setdefault(row.cluster_queue, []).append(
                ((end - row.created_at).total_seconds(), True)
            )
    return waits


def nearest_rank(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


def bucket_width(value: float) -> float:
    """The width of the dashboard's histogram bucket ``value`` lies in: the
    dashboard cannot tell waits apart within it."""
    lower = 0.0
    for bound in WAIT_BUCKETS:
        if value <= bound:
            return bound - lower
        lower = bound
    return math.inf


def test_todays_policy_replays_what_the_demo_recorded(
    demo: SimulatedBackend, clock: Clock, django_capture_on_commit_callbacks: Any
) -> None:
    """The what-if the issue saw, on the embedded demo's load: a window ending
    now, workloads still running and queued at its end, jobs 60x faster than
    their declared runtimes, work already running when it opens, approvals
    nobody gave. Today's policy, replayed, must give the waits sync recorded
    (same workloads, same definition: creation to first admission, censored at
    the window's end) and, counted the dashboard's way, the dashboard's figures.

    Tolerances: the cluster acts in steps (TICK), and a replay reproduces a
    cascade of preemptions only approximately (which victim goes depends on
    the exact moment), so waits agree to within a step or a tenth, whichever
    is more, and never-admitted counts to within a tenth of the queue's
    workloads (at least one). The dashboard counts every admission, a
    readmission after a preemption too: to within a fifth (at least three).
    It keeps waits as an hourly histogram and interpolates its percentiles
    inside a bucket: two sets of waits with the same counts per bucket read
    the same, so its figures are compared to within the width of the bucket they fall in."""
    record(demo, clock, WINDOW_END - timedelta(seconds=TICK), seed=1)
    # What the dashboard showed for the window at its last step (its own read).
    dashboard = stats.waits_since(WINDOW_START)
    # The cluster goes on; the admin asks a little later.
    record(demo, clock, WINDOW_END + timedelta(minutes=2), seed=2)
    with django_capture_on_commit_callbacks(execute=True):
        run = whatif.create_run(
            get_user_model().objects.get(username="admin"),
            source="window",
            window_start=WINDOW_START,
            window_end=WINDOW_END,
            changes=[{"cluster_queue": "research", "field": "fair_sharing_weight", "value": "2"}],
        )
    run.refresh_from_db()
    assert run.state == WhatIfState.SUCCEEDED, run.error
    result = run.result
    queues = {q["cluster_queue"]: q for q in result["queues"]}
    recorded = recorded_waits(WINDOW_START, WINDOW_END)
    assert set(recorded) >= {"platform", "research", "serving"}
    # 1. What sync recorded for the same workloads.
    for name, waits in sorted(recorded.items()):
        today = queues[name]["today"]
        values = [wait for wait, _ in waits]
        never = sum(1 for _, censored in waits if censored)
        assert today["workloads"] == len(waits), name
        assert abs(today["never_admitted"] - never) <= max(1, len(waits) // 10), (name, today)
        for key, p in (("p50_wait", 50), ("p95_wait", 95), ("max_wait", 100)):
            expected = nearest_rank(values, p)
            tolerance = max(TICK, expected / 10)
            assert abs(today[key] - expected) <= tolerance, (name, key, today[key], expected)
        # The page shows the recorded figures beside the replay's.
        assert queues[name]["recorded"] is not None, "no recorded figures"
        assert queues[name]["recorded"]["p95_wait"] == pytest.approx(
            nearest_rank(values, 95), abs=1e-3
        )
    assert result["runtime_sources"]["running"] > 0  # work still running at the end
    assert any("were still running" in note for note in result["notes"])
    # 2. The dashboard's figures for the window (its hourly rollups, as it read
    # them when the window ended; the run subtracts what sync counted since),
    # and today's replay counted its way.
    assert result["dashboard_hours"] == [WINDOW_START.isoformat(), WINDOW_END.isoformat()]
    assert set(dashboard) >= {"platform", "research", "serving"}
    for name, shown in sorted(dashboard.items()):
        replayed = queues[name]["dashboard"]["replayed"]
        assert queues[name]["dashboard"]["recorded"] == {
            "admissions": shown.admissions,
            "p50_wait": pytest.approx(shown.p50, abs=1e-3),
            "p95_wait": pytest.approx(shown.p95, abs=1e-3),
        }
        assert abs(replayed["admissions"] - shown.admissions) <= max(3, shown.admissions // 5)
        for key, figure in (("p50_wait", shown.p50), ("p95_wait", shown.p95)):
            assert figure is not None
            assert abs(replayed[key] - figure) <= bucket_width(figure), (name, key, replayed)
