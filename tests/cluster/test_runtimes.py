"""Runtimes nobody declared are estimated from what similar work recorded on
this cluster, and declared ones are played at the cluster's pace: a start
estimate is a range that a job really starts in, not "unknown"."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from cluster.forecast import Candidate, forecast_new
from cluster.models import WorkloadState as W
from cluster.runtimes import Runtimes, quantile, recorded_runtimes
from jobs.models import JobRequest
from queues.models import Team
from tests.jobs.conftest import GPU, Org, org
from tests.whatif.test_whatif_task import recorded

__all__ = ["org"]
MINUTE = 60.0


def ended(*seconds: float) -> list[tuple[float, bool]]:
    return [(float(s), True) for s in seconds]


def test_the_narrowest_group_with_enough_samples_judges() -> None:
    runtimes = Runtimes(
        by_class={"training-large": ended(*range(100, 200, 10)), "few": ended(1)},
        by_queue={"research": ended(*range(1000, 2000, 100))},
        everything=ended(*range(1, 21)),
    )
    assert runtimes.range_for("training-large", "research") == (100.0, 180.0)
    # Too few of its class: its ClusterQueue's; none of either: everything's.
    assert runtimes.range_for("few", "research") == (1000.0, 1800.0)
    assert runtimes.range_for("few", "serving") == (2.0, 18.0)
    assert Runtimes().range_for("training-large", "research") is None


def test_a_running_workload_is_judged_by_the_runs_longer_than_it_has_run() -> None:
    runtimes = Runtimes(everything=ended(*range(10, 210, 10)))
    assert runtimes.range_for("", "", ran=0.0) == (20.0, 180.0)
    # Past 150 s, only 160..200 remain possible.
    assert runtimes.range_for("", "", ran=150.0) == (160.0, 200.0)
    # Longer than anything recorded: as long again.
    assert runtimes.range_for("", "", ran=500.0) == (500.0, 1000.0)


def test_work_still_running_counts_as_at_least_as_long_as_it_has_run() -> None:
    # Ten short runs ended; ten others have run 1000 s and go on. Leaving those
    # out would say 90% of work ends by 100 s; it is only known that at most
    # half does, so the long end is beyond what the record can say.
    short = ended(*range(10, 110, 10))
    going = [(1000.0, False)] * 10
    assert quantile(sorted(short), 0.9) == 90.0
    runtimes = Runtimes(everything=sorted(short + going))
    assert runtimes.range_for("", "", ran=0.0) == (20.0, 2000.0)
    assert quantile(sorted(short + going), 0.5) == 100.0


def test_recorded_runtimes_are_last_weeks_finishes_by_class_and_queue(org: Org) -> None:
    now = timezone.now()
    for i in range(3):
        recorded("research", f"done-{i}", created=now - timedelta(hours=2), runtime=600 + i)
    recorded("research", "old", created=now - timedelta(days=8), runtime=60)
    recorded("research", "running", created=now - timedelta(hours=1), runtime=None)
    found = recorded_runtimes(now)
    runs = [(600.0, True), (601.0, True), (602.0, True), (3600.0, False)]  # running: 1 h so far
    assert found.by_queue == {"research": runs}
    assert found.by_class == {"research": runs}  # its LocalQueue's name


@pytest.fixture
def full_research(org: Org) -> Any:
    """research holds all it may (16 + 8 borrowed GPUs) with three 8-GPU
    workloads admitted 10 minutes ago that declared no runtime; twenty
    research jobs recorded before ran 5 to 100 minutes."""
    now = timezone.now().replace(microsecond=0)
    for i in range(20):
        recorded("research", f"past-{i}", created=now - timedelta(days=1), runtime=(i + 1) * 300)
    running = [
        recorded("research", f"run-{i}", created=now - timedelta(minutes=10), runtime=None)
        for i in range(3)
    ]
    for row in running:
        row.flavors = {"main": {GPU: "h100"}}
        row.save()
    return now, running


def candidate() -> Candidate:
    return Candidate(
        name="next",
        namespace="research",
        cluster_queue="research",
        priority=1000,
        pod_sets=[{"name": "main", "count": 1, "requests": {GPU: 8}}],
        local_queue="research",
    )


def test_a_dry_run_behind_undeclared_work_gives_the_range_the_record_allows(
    full_research: Any,
) -> None:
    now, _ = full_research
    forecast = forecast_new(candidate(), now)
    assert not forecast.fits_now
    # The three have run 10 min: of the runs longer than that (15..100 min),
    # the 10th percentile is 20 min and the 90th 95 min; the first of them to
    # end frees the GPUs (research's class is StrictFIFO: its head is tried then).
    assert forecast.earliest_start == now + timedelta(minutes=10)
    assert forecast.latest_start == now + timedelta(minutes=85)


def test_declared_runtimes_are_played_at_the_simulated_clusters_speed(
    full_research: Any, settings: Any
) -> None:
    now, running = full_research
    settings.BERTH_CLUSTER = "simulated"
    settings.BERTH_SIMULATED_SPEEDUP = 60
    for row in running:
        row.state = W.ADMITTED
        row.save()
        JobRequest.objects.create(
            name=row.name,
            team=Team.objects.get(slug="research"),
            namespace="research",
            image="registry.example.com/x:1",
            local_queue="research",
            cluster_queue="research",
            submitted_at=row.created_at,
            workload=row,
            expected_runtime_seconds=3600,  # an hour of work: a minute there
        )
    forecast = forecast_new(candidate(), now)
    # Ran 10 min of a 1-min runtime: each is due now; the simulated Kueue
    # weighs pending work again in the step capacity frees (no second).
    assert forecast.earliest_start == now
    assert forecast.latest_start == now


def test_the_last_hours_arrivals_are_expected_again_in_the_next(org: Org) -> None:
    from cluster.state import cluster_state

    now = timezone.now().replace(microsecond=0)
    recorded("research", "done", created=now - timedelta(minutes=30), runtime=600)
    recorded("research", "waiting", created=now - timedelta(minutes=10), admitted=False)
    recorded("research", "older", created=now - timedelta(minutes=90), runtime=60)
    expected = {w.name: w for w in cluster_state(now).expected_arrivals()}
    assert set(expected) == {"done.next", "waiting.next"}
    assert expected["done.next"].creation_time == (now + timedelta(minutes=30)).timestamp()
    assert expected["done.next"].runtime == 600.0  # as long as it ran
    # Not run yet, nothing declared: what research's work ran (the one finish here).
    assert expected["waiting.next"].runtime is None
    assert expected["waiting.next"].runtime_range is None  # too few runs to say


def test_a_cluster_younger_than_an_hour_expects_what_it_has_seen_as_soon(org: Org) -> None:
    from cluster.state import cluster_state

    now = timezone.now().replace(microsecond=0)
    recorded("research", "first", created=now - timedelta(minutes=20), runtime=600)
    recorded("research", "then", created=now - timedelta(minutes=5), admitted=False)
    expected = {w.name: w.creation_time for w in cluster_state(now).expected_arrivals()}
    assert expected == {
        "first.next": now.timestamp(),
        "then.next": (now + timedelta(minutes=15)).timestamp(),
    }


def test_work_waiting_for_approval_is_not_running_and_is_due_by_its_deadline(
    org: Org, settings: Any
) -> None:
    from cluster.state import cluster_state
    from queues.engine.model import CheckState

    settings.BERTH_APPROVAL_TIMEOUT = 4 * 3600
    now = timezone.now().replace(microsecond=0)
    row = recorded("research", "urgent", created=now - timedelta(hours=1), runtime=None)
    row.state = W.QUOTA_RESERVED
    row.flavors = {"main": {GPU: "h100"}}
    row.admitted_at = None
    row.reserved_at = now - timedelta(hours=1)
    row.admission_checks = {"berth-approval": {"state": "Pending"}}
    row.save()
    state = cluster_state(now)
    workload = state.scheduler.workloads["research/urgent"]
    assert workload.admission is not None and not workload.is_admitted
    assert workload.check_states == {"berth-approval": CheckState.PENDING}
    assert state.check_left == {"research/urgent": 3 * 3600.0}  # reserved an hour ago
