"""What-if runs on PostgreSQL: recorded workloads replayed under today's policy
and a proposal, by the task, once; bad proposals refused before anything is
queued, naming the field; scenario files; progress."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.utils import timezone

from cluster.models import WorkloadRecord
from cluster.models import WorkloadState as W
from jobs.models import JobRequest
from queues.errors import PolicyInvalid
from queues.models import Team
from tests.celery_broker import redis_worker
from tests.jobs.conftest import GPU, Org, org
from whatif import runs as whatif_runs
from whatif import service as whatif
from whatif.models import WhatIfRun, WhatIfSource, WhatIfState
from whatif.tasks import run_whatif

__all__ = ["org"]

SCENARIO = Path(__file__).parents[1] / "engine/scenarios/preempt_reclaim_lower_priority.yaml"
HOUR = 3600


def recorded(
    queue: str,
    name: str,
    *,
    created: datetime,
    gpus: int = 8,
    runtime: float | None = HOUR,
    admitted: bool = True,
    priority_class: str = "train-low",
) -> WorkloadRecord:
    """A workload sync recorded: finished after ``runtime`` when given."""
    admitted_at = created if admitted else None
    finished_at = created + timedelta(seconds=runtime) if admitted and runtime else None
    return WorkloadRecord.objects.create(
        uid=f"uid-{queue}-{name}",
        namespace=queue,
        name=name,
        cluster_queue=queue,
        local_queue=queue,
        priority=1000,
        priority_class=priority_class,
        requested={GPU: gpus},
        pod_sets=[{"name": "main", "count": 1, "requests": {GPU: gpus}}],
        state=W.FINISHED if finished_at else (W.ADMITTED if admitted else W.PENDING),
        created_at=created,
        admitted_at=admitted_at,
        finished_at=finished_at,
    )


@pytest.fixture
def congested(org: Org) -> dict[str, datetime]:
    """Twelve 8-GPU research jobs of an hour each arriving together: research
    may hold 16 + 8 borrowed GPUs, so they run three at a time. Serving runs
    two jobs nobody saw finish: one a Berth job that expects 30 min, one not."""
    now = timezone.now().replace(microsecond=0)
    start = now - timedelta(hours=3)
    for i in range(12):
        recorded("research", f"train-{i}", created=start + timedelta(seconds=i))
    declared = recorded("serving", "declared", created=start + timedelta(minutes=1), runtime=None)
    recorded("serving", "unknown", created=start + timedelta(minutes=2), runtime=None)
    JobRequest.objects.create(
        name="declared",
        team=Team.objects.get(slug="serving"),
        namespace="serving",
        image="registry.example.com/x:1",
        local_queue="training-large",
        cluster_queue="serving",
        submitted_at=start,
        expected_runtime_seconds=1800,
        workload=declared,
    )
    # Outside the window: not replayed.
    recorded("research", "old", created=start - timedelta(hours=1))
    return {"start": start, "end": now}


def raise_research(value: str = "48") -> list[dict[str, str]]:
    return [
        {
            "cluster_queue": "research",
            "field": "nominal_quota",
            "flavor": "h100",
            "resource": GPU,
            "value": value,
        }
    ]


def running_run(org: Org, congested: dict[str, datetime], capture: Any, **fields: Any) -> WhatIfRun:
    """An admin's run over the congested window with research raised, as a
    worker holds it once claimed (running; ``fields`` set too); ``capture`` is
    ``django_capture_on_commit_callbacks``, so its task is not sent."""
    with capture():
        run = whatif.create_run(
            org.users["admin"],
            source="window",
            window_start=congested["start"],
            changes=raise_research(),
        )
    WhatIfRun.objects.filter(pk=run.pk).update(state=WhatIfState.RUNNING, **fields)
    return run


def queue_row(result: dict[str, Any], name: str) -> dict[str, Any]:
    return next(q for q in result["queues"] if q["cluster_queue"] == name)


def test_more_quota_for_a_congested_queue_lowers_its_p95_wait(
    org: Org, congested: dict[str, datetime], django_capture_on_commit_callbacks: Any
) -> None:
    admin = org.users["admin"]
    with django_capture_on_commit_callbacks() as callbacks:
        run = whatif.create_run(
            admin,
            source="window",
            window_start=congested["start"].strftime("%Y-%m-%dT%H:%M:%S"),
            window_end=congested["end"].isoformat(),
            changes=raise_research(),
        )
    assert run.state == WhatIfState.QUEUED and run.workloads == 14
    assert len(callbacks) == 1  # the task is queued after the commit, not before
    assert run.baseline["clusterQueues"]  # today's policy, as it was when asked

    assert run_whatif.apply(args=[run.pk]).get() == "succeeded"
    run.refresh_from_db()
    assert run.state == WhatIfState.SUCCEEDED and run.progress == 100, run.error
    assert run.finished_at is not None and run.started_at is not None
    result = run.result
    research = queue_row(result, "research")
    today, proposal = research["today"], research["proposal"]
    assert today["workloads"] == proposal["workloads"] == 12
    assert (today["nominal"], proposal["nominal"]) == ("16", "48")
    # Three at a time: the last wave waits three hours; seven at a time: one.
    assert today["p95_wait"] == pytest.approx(3 * HOUR, abs=120)
    assert proposal["p95_wait"] < today["p95_wait"]
    assert proposal["p95_wait"] == pytest.approx(HOUR, abs=120)
    assert today["borrowed_hours"] > 0
    assert result["totals"]["today"]["p95_wait"] > result["totals"]["proposal"]["p95_wait"]
    assert result["resource"] == GPU
    # Where each runtime came from, said in the result: serving's two still run.
    assert result["runtime_sources"] == {"recorded": 12, "running": 2, "job": 0, "default": 0}
    assert any("2 workload(s) were still running" in note for note in result["notes"])


def test_bad_changes_are_refused_naming_the_field_and_nothing_is_queued(
    org: Org, congested: dict[str, datetime], django_capture_on_commit_callbacks: Any
) -> None:
    changes = [
        *raise_research("-4"),
        {"cluster_queue": "nope", "field": "fair_sharing_weight", "value": "2"},
        {},  # a blank row keeps its number
        {"cluster_queue": "serving", "field": "within_cluster_queue", "value": "Sometimes"},
        {"cluster_queue": "serving", "field": "nominal_quota", "flavor": "a100",
         "resource": GPU, "value": "8"},
        {"cluster_queue": "research-dev", "field": "lending_limit", "flavor": "h100",
         "resource": GPU, "value": "12"},
    ]  # fmt: skip
    with (
        django_capture_on_commit_callbacks() as callbacks,
        pytest.raises(PolicyInvalid) as caught,
    ):
        whatif.create_run(org.users["admin"], source="window", changes=changes)
    errors = {e.field: e for e in caught.value.errors}
    assert errors["changes[0].value"].rule == "non-negative"
    assert "-4 is negative" in errors["changes[0].value"].message
    assert errors["changes[1].cluster_queue"].rule == "unknown-cluster-queue"
    assert "'nope'" in errors["changes[1].cluster_queue"].message
    assert errors["changes[3].value"].rule == "unsupported-value"
    assert "LowerPriority" in errors["changes[3].value"].message  # what it may be
    assert errors["changes[4].flavor"].rule == "unknown-flavor"
    assert errors["changes[5].value"].rule == "lending-limit-above-nominal"
    assert not callbacks
    assert not WhatIfRun.objects.exists()


@pytest.mark.parametrize(
    ("kwargs", "field", "rule"),
    [
        ({"changes": []}, "changes", "required"),
        ({"window_start": "yesterday"}, "window_start", "format"),
        ({"window_start": "2026-01-02T00:00", "window_end": "2026-01-01T00:00"}, "window_end",
         "after-start"),
        ({"window_start": "2020-01-01T00:00", "window_end": "2020-01-02T00:00"}, "window_start",
         "no-workloads"),
        ({"source": "scenario", "scenario": ""}, "scenario", "required"),
        ({"source": "scenario", "scenario": "clusterQueues: ["}, "scenario", "yaml"),
        ({"source": "scenario", "scenario": "clusterQueues: [{name: a, bogus: 1}]"}, "scenario",
         "unknown-field"),
    ],
)  # fmt: skip
def test_bad_requests_name_the_field(
    org: Org, congested: dict[str, datetime], kwargs: dict[str, Any], field: str, rule: str
) -> None:
    request: dict[str, Any] = {"source": "window", "changes": raise_research(), **kwargs}
    with pytest.raises(PolicyInvalid) as caught:
        whatif.create_run(org.users["admin"], **request)
    assert (field, rule) in [(e.field, e.rule) for e in caught.value.errors], caught.value.errors
    assert not WhatIfRun.objects.exists()


def test_a_window_with_too_many_workloads_is_refused(
    org: Org, congested: dict[str, datetime], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(whatif_runs, "MAX_WORKLOADS", 10)  # where the check reads it
    with pytest.raises(PolicyInvalid) as caught:
        whatif.create_run(
            org.users["admin"],
            source="window",
            window_start=congested["start"],
            changes=raise_research(),
        )
    (error,) = caught.value.errors
    assert error.field == "window_start" and error.rule == "too-many-workloads"
    assert "14 workloads" in error.message and "at most 10" in error.message


def test_a_scenario_file_runs_with_its_own_policy(
    org: Org, django_capture_on_commit_callbacks: Any
) -> None:
    text = SCENARIO.read_text()
    with django_capture_on_commit_callbacks(execute=True):  # the task, eagerly
        run = whatif.create_run(
        org.users["admin"],
            source="scenario",
            scenario=text,
            changes=[
                {"cluster_queue": "a", "field": "nominal_quota", "flavor": "default",
                 "resource": GPU, "value": "8"},
            ],
        )  # fmt: skip
    assert run.source == WhatIfSource.SCENARIO and run.workloads == 4
    run.refresh_from_db()
    assert run.state == WhatIfState.SUCCEEDED, run.error
    assert run.progress == 100
    assert {q["cluster_queue"] for q in run.result["queues"]} == {"a", "b"}
    a = queue_row(run.result, "a")
    assert (a["today"]["nominal"], a["proposal"]["nominal"]) == ("4", "8")
    assert run.result["totals"]["today"]["workloads"] == 4


def test_a_preemption_change_in_a_scenario_shows_in_preemptions(
    org: Org, django_capture_on_commit_callbacks: Any
) -> None:
    """The scenario file with runtimes: today a's reclaim preempts b's borrower;
    with reclaimWithinCohort Never it waits instead."""
    document = yaml.safe_load(SCENARIO.read_text())
    for workload in document["workloads"]:
        workload["runtime"] = "1h"
    with django_capture_on_commit_callbacks(execute=True):
        run = whatif.create_run(
            org.users["admin"],
            source="scenario",
            scenario=yaml.safe_dump(document),
            changes=[{"cluster_queue": "a", "field": "reclaim_within_cohort", "value": "Never"}],
        )
    run.refresh_from_db()
    assert run.state == WhatIfState.SUCCEEDED, run.error
    b = queue_row(run.result, "b")
    assert b["today"]["preemptions"] == 1 and b["proposal"]["preemptions"] == 0
    assert b["today"]["gpu_hours_lost"] > 0 == b["proposal"]["gpu_hours_lost"]
    a = queue_row(run.result, "a")
    assert a["proposal"]["p95_wait"] > a["today"]["p95_wait"]


def test_the_task_runs_a_run_once(
    org: Org, congested: dict[str, datetime], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks():  # not executed: the test runs the task
        run = whatif.create_run(
            org.users["admin"],
            source="window",
            window_start=congested["start"],
            changes=raise_research(),
        )
    assert run_whatif.apply(args=[run.pk]).get() == "succeeded"
    run.refresh_from_db()
    first = (run.finished_at, run.started_at, run.result)
    assert run_whatif.apply(args=[run.pk]).get() == "skipped"
    run.refresh_from_db()
    assert (run.finished_at, run.started_at, run.result) == first
    # A run another worker is running is left alone too.
    WhatIfRun.objects.filter(pk=run.pk).update(state=WhatIfState.RUNNING, result={})
    assert whatif.execute(run.pk) == "skipped"
    run.refresh_from_db()
    assert run.state == WhatIfState.RUNNING and run.result == {}
    assert whatif.execute(10**9) == "skipped"  # and one that is gone


def test_a_run_whose_inputs_no_longer_hold_fails_with_the_reason(
    org: Org, congested: dict[str, datetime], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks():
        run = whatif.create_run(
            org.users["admin"],
            source="window",
            window_start=congested["start"],
            changes=raise_research(),
        )
    WorkloadRecord.objects.all().delete()  # retention pruned the window meanwhile
    assert whatif.execute(run.pk) == "failed"
    run.refresh_from_db()
    assert run.state == WhatIfState.FAILED and run.finished_at is not None
    assert "no workloads were created" in run.error


def test_progress_is_written_at_most_every_half_second_while_running(
    org: Org, congested: dict[str, datetime], django_capture_on_commit_callbacks: Any
) -> None:
    run = running_run(org, congested, django_capture_on_commit_callbacks)
    clock = iter([0.0, 0.1, 0.6, 0.7, 5.0, 65.6, 130.0])
    writer = whatif.ProgressWriter(run.pk, clock=lambda: next(clock))
    seen = []
    for percent in (10, 20, 30, 40):
        writer(percent)
        seen.append(WhatIfRun.objects.get(pk=run.pk).progress)
    assert seen == [10, 10, 30, 30]  # 0.1 s and 0.7 s after a write: skipped
    WhatIfRun.objects.filter(pk=run.pk).update(heartbeat_at=None)
    writer(30)  # no further, and only 4.4 s after the last write: nothing
    assert WhatIfRun.objects.get(pk=run.pk).heartbeat_at is None
    writer(20)  # no further, but a minute on: still alive, progress kept
    alive = WhatIfRun.objects.get(pk=run.pk)
    assert alive.heartbeat_at is not None and alive.progress == 30
    WhatIfRun.objects.filter(pk=run.pk).update(state=WhatIfState.FAILED)
    writer(90)  # closed meanwhile: compare-and-set writes nothing
    assert WhatIfRun.objects.get(pk=run.pk).progress == 30


def test_progress_climbs_as_both_replays_go_to_99(
    org: Org, congested: dict[str, datetime], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks():
        run = whatif.create_run(
            org.users["admin"],
            source="window",
            window_start=congested["start"],
            changes=raise_research(),
        )
    prepared = whatif.prepared_for(run)
    reported: list[int] = []
    whatif.compare(prepared.today, prepared.proposal, prepared.stream(), reported.append)
    # The two replays advance side by side: the share both have done, never back.
    assert reported == sorted(reported) and 0 < reported[0] < 50 and reported[-1] == 99
    assert len(set(reported)) == len(reported) >= 5


# ------------------------------------------------------------- a real worker


@pytest.fixture
def worker() -> Iterator[None]:
    with redis_worker():
        yield


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_runs_a_run_delivered_twice_once(
    queue_class_templates: None, org: Org, congested: dict[str, datetime], worker: None
) -> None:
    run = whatif.create_run(
        org.users["admin"],
        source="window",
        window_start=congested["start"],
        changes=raise_research(),
    )  # committed: queued on Redis
    run_whatif.delay(run.pk)  # a redelivery
    deadline = time.monotonic() + 60
    while WhatIfRun.objects.get(pk=run.pk).state != WhatIfState.SUCCEEDED:
        if time.monotonic() > deadline:
            pytest.fail(f"the worker did not finish the run: {WhatIfRun.objects.get(pk=run.pk)}")
        time.sleep(0.1)
    run.refresh_from_db()
    finished = run.finished_at
    marker = whatif.create_run(
        org.users["admin"], source="window", window_start=congested["start"],
        changes=raise_research("32"),
    )  # fmt: skip
    while WhatIfRun.objects.get(pk=marker.pk).state != WhatIfState.SUCCEEDED:
        if time.monotonic() > deadline:
            pytest.fail("the worker did not drain its queue")
        time.sleep(0.1)
    run.refresh_from_db()
    assert run.finished_at == finished and run.progress == 100  # the duplicate did nothing
    assert queue_row(run.result, "research")["proposal"]["nominal"] == "48"


FAIR_SHARING_SCENARIO = """
resourceFlavors: [{name: default}]
clusterQueues:
  - {name: a, cohortName: c, resourceGroups: [{coveredResources: [nvidia.com/gpu],
     flavors: [{name: default, resources: [{name: nvidia.com/gpu, nominalQuota: 2}]}]}]}
  - {name: b, cohortName: c, resourceGroups: [{coveredResources: [nvidia.com/gpu],
     flavors: [{name: default, resources: [{name: nvidia.com/gpu, nominalQuota: 2}]}]}]}
  - {name: lender, cohortName: c, resourceGroups: [{coveredResources: [nvidia.com/gpu],
     flavors: [{name: default, resources: [{name: nvidia.com/gpu, nominalQuota: 6}]}]}]}
workloads:
  - {name: a-old, clusterQueue: a, creationTime: 0, runtime: 2h,
     podSets: [{requests: {nvidia.com/gpu: 4}}]}
  - {name: b-old, clusterQueue: b, creationTime: 0, runtime: 2h,
     podSets: [{requests: {nvidia.com/gpu: 2}}]}
  - {name: a-new, clusterQueue: a, creationTime: 60, runtime: 1h,
     podSets: [{requests: {nvidia.com/gpu: 4}}]}
  - {name: b-new, clusterQueue: b, creationTime: 60, runtime: 1h,
     podSets: [{requests: {nvidia.com/gpu: 4}}]}
"""


def test_a_proposal_can_turn_fair_sharing_on_for_the_whole_cluster(
    org: Org, django_capture_on_commit_callbacks: Any
) -> None:
    """Room for one of two equal heads. Classic order takes a's (its name sorts
    first); fair sharing takes b's, whose queue would borrow the smaller share."""
    with django_capture_on_commit_callbacks(execute=True):
        run = whatif.create_run(
            org.users["admin"],
            source="scenario",
            scenario=FAIR_SHARING_SCENARIO,
            changes=[{"field": "fair_sharing", "value": "on"}],
        )
    run.refresh_from_db()
    assert run.state == WhatIfState.SUCCEEDED, run.error
    a, b = queue_row(run.result, "a"), queue_row(run.result, "b")
    assert a["today"]["p95_wait"] < b["today"]["p95_wait"]
    assert b["proposal"]["p95_wait"] < a["proposal"]["p95_wait"]
    assert whatif.describe_changes(run.changes) == [
        "whole cluster: fair sharing, whole cluster (on or off) → on"
    ]


@pytest.mark.parametrize(
    ("change", "field", "rule"),
    [
        ({"field": "fair_sharing", "value": "maybe"}, "changes[0].value", "on-or-off"),
        (
            {"cluster_queue": "a", "field": "fair_sharing", "value": "on"},
            "changes[0].cluster_queue",
            "whole-cluster",
        ),
    ],
)
def test_a_bad_fair_sharing_change_names_the_field(
    org: Org, change: dict[str, str], field: str, rule: str
) -> None:
    with pytest.raises(PolicyInvalid) as caught:
        whatif.create_run(
            org.users["admin"],
            source="scenario",
            scenario=FAIR_SHARING_SCENARIO,
            changes=[change],
        )
    assert [(e.field, e.rule) for e in caught.value.errors] == [(field, rule)]
    assert not WhatIfRun.objects.exists()
