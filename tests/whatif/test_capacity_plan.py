"""Capacity plans on PostgreSQL, through the API: a window of recorded
workloads searched by a real Celery worker, once; bad requests refused
naming the field and the rule, storing nothing; admins only."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
import yaml
from django.utils import timezone

from tests.celery_broker import redis_worker
from tests.engine.test_capacity import steady as steady_scenario
from tests.jobs.conftest import Org, org
from tests.whatif.test_whatif_task import recorded
from whatif.capacity import _Progress, check, execute_plan
from whatif.models import CapacityPlan, WhatIfState
from whatif.tasks import run_capacity_plan

__all__ = ["org"]

URL = "/api/v1/plans/capacity/"
HOUR = 3600


@pytest.fixture
def steady(org: Org) -> dict[str, datetime]:
    """A day of research jobs of 8 GPUs, one every 10 minutes, each 45 minutes:
    40 GPUs at once. Research (training-large) holds 16 of the 48 h100 GPUs
    and may borrow 8 more, so today most of them wait."""
    end = timezone.now().replace(microsecond=0)
    start = end - timedelta(hours=24)
    for i in range(24 * 6):
        recorded(
            "research",
            f"train-{i}",
            created=start + timedelta(minutes=10 * i),
            runtime=45 * 60,
        )
    return {"start": start, "end": end}


def body(**overrides: Any) -> dict[str, Any]:
    return {
        "targets": [{"queue": "training-large", "percentile": 90, "max_wait": "1h"}],
        "flavors": ["h100"],
        "seeds": 1,
        **overrides,
    }


@pytest.mark.parametrize(
    ("overrides", "field", "rule"),
    [
        ({"targets": []}, "targets", "required"),
        ({"targets": [{"queue": "nope", "max_wait": "1h"}]}, "targets[0].queue", "unknown-queue"),
        ({"targets": [{"max_wait": "1h"}]}, "targets[0].queue", "required"),
        (
            {"targets": [{"queue": "research", "percentile": 0, "max_wait": 60}]},
            "targets[0].percentile",
            "range",
        ),
        ({"targets": [{"queue": "research"}]}, "targets[0].max_wait", "required"),
        (
            {"targets": [{"queue": "research", "max_wait": -5}]},
            "targets[0].max_wait",
            "non-negative",
        ),
        (
            {"targets": [{"queue": "research", "max_wait": 60, "limit": 1}]},
            "targets[0].limit",
            "unknown-field",
        ),
        (
            {
                "targets": [
                    {"queue": "research", "percentile": 90, "max_wait": 60},
                    {"queue": "research", "percentile": 50, "max_wait": 10},
                ]
            },
            "targets[1].percentile",
            "one-percentile-per-queue",
        ),
        (
            {"targets": [{"queue": "interactive-dev", "max_wait": "1h"}]},
            "targets[0].queue",
            "no-workloads",
        ),
        ({"flavors": ["a100"]}, "flavors[0]", "unknown-flavor"),
        ({"seeds": 0}, "seeds", "range"),
        ({"seeds": 1.5}, "seeds", "whole-number"),
        ({"growth": 0.5}, "growth", "range"),
        ({"growth": "lots"}, "growth", "type"),
        ({"window_start": "yesterday"}, "window_start", "format"),
        (
            {"window_start": "2020-01-01T00:00", "window_end": "2020-01-02T00:00"},
            "window_start",
            "no-workloads",
        ),
        (
            {"window_end": "2000-01-01T00:00", "window_start": "2001-01-01"},
            "window_end",
            "after-start",
        ),
        ({"source": "cluster"}, "source", "unsupported-value"),
        ({"scenario": "x", "source": "scenario"}, "scenario", "type"),
        ({"colour": "red"}, "colour", "unknown-field"),
    ],
)
def test_a_bad_request_names_the_field_and_rule_and_stores_nothing(
    org: Org, steady: dict[str, datetime], overrides: dict[str, Any], field: str, rule: str
) -> None:
    answer = org.admin.post(URL, body(**overrides), format="json")
    assert answer.status_code == 400, answer.content
    errors = {(e["field"], e["rule"]) for e in answer.json()["errors"]}
    assert (field, rule) in errors, answer.json()
    assert CapacityPlan.objects.count() == 0


def test_only_platform_admins_plan(org: Org, steady: dict[str, datetime]) -> None:
    assert org.alice.post(URL, body(), format="json").status_code == 403
    assert org.alice.get(URL).status_code == 403
    assert CapacityPlan.objects.count() == 0


def test_a_target_is_a_queue_class_or_a_cluster_queue(org: Org, steady: dict[str, Any]) -> None:
    recorded("research-dev", "notebook", created=steady["start"], gpus=1)
    checked = check(
        body(
            targets=[
                {"queue": "research-dev", "max_wait": 60},
                {"queue": "training-large", "max_wait": "30m"},
            ]
        )
    )
    groups = checked.request["groups"]
    assert groups["training-large"] == ["research", "serving"]
    assert groups["research-dev"] == ["research-dev"]  # a ClusterQueue, named by a target
    assert groups["interactive-dev"] == ["research-dev"]
    assert checked.request["targets"][1] == {
        "queue": "training-large",
        "percentile": 90.0,
        "max_wait": 1800.0,
    }
    assert check(body(flavors=None)).request["flavors"] == ["h100", "h100-spot"]


def test_a_plan_finds_the_gpus_research_needs_and_runs_once(
    org: Org, steady: dict[str, datetime], django_capture_on_commit_callbacks: Any
) -> None:
    """Research gets a third of h100 (16 of 48) and 8 borrowed: 40 GPUs at
    once need 3 × (40 − 8) = 96 h100 GPUs, searched in whole nodes of 8 (the
    seed's jitter and runtimes move it a node or so)."""
    with django_capture_on_commit_callbacks() as callbacks:
        answer = org.admin.post(URL, body(), format="json")
    assert answer.status_code == 202, answer.content
    plan = answer.json()
    assert plan["state"] == "queued" and plan["workloads"] == 24 * 6
    assert len(callbacks) == 1
    assert execute_plan(plan["id"]) == "succeeded"
    assert execute_plan(plan["id"]) == "skipped"  # a redelivery
    done = org.admin.get(f"{URL}{plan['id']}/").json()
    assert done["state"] == "succeeded" and done["progress"] == 100
    (flavor,) = done["result"]["flavors"]
    assert flavor["current"] == 48 and flavor["node_gpus"] == 8
    (found,) = flavor["answers"]
    assert not found["holds_today"]
    assert 88 <= found["gpus"] <= 112 and (found["gpus"] - 48) % 8 == 0
    gpus = [point["gpus"] for point in flavor["curve"]]
    assert 48 in gpus and found["gpus"] in gpus
    assert set(done["result"]["groups"]) >= {"training-large", "interactive-dev"}
    assert org.admin.get(URL).json()["results"][0]["id"] == plan["id"]


@pytest.fixture
def worker() -> Iterator[None]:
    with redis_worker():
        yield


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_searches_a_plan_delivered_twice_once(
    queue_class_templates: None, org: Org, steady: dict[str, datetime], worker: None
) -> None:
    answer = org.admin.post(
        URL, body(targets=[{"queue": "research", "max_wait": "2h"}]), format="json"
    )
    assert answer.status_code == 202, answer.content
    plan_id = answer.json()["id"]
    run_capacity_plan.delay(plan_id)  # a redelivery
    deadline = time.monotonic() + 120
    while CapacityPlan.objects.get(pk=plan_id).state != WhatIfState.SUCCEEDED:
        plan = CapacityPlan.objects.get(pk=plan_id)
        if plan.state == WhatIfState.FAILED or time.monotonic() > deadline:
            pytest.fail(f"the worker did not finish the plan: {plan} {plan.error}")
        time.sleep(0.2)
    plan = CapacityPlan.objects.get(pk=plan_id)
    finished = plan.finished_at
    assert plan.progress == 100 and plan.result["flavors"][0]["answers"][0]["gpus"]
    time.sleep(1)  # the redelivery, if it ran the search again, would move finished_at
    assert CapacityPlan.objects.get(pk=plan_id).finished_at == finished


def test_a_scenario_plan_runs_on_its_own_policy_and_stream(org: Org) -> None:
    """Steady work in a scenario (an 4-GPU job every 10 min for 45 min: 20 GPUs
    at once) planned through the API: the answer is at least that, in whole
    nodes from the scenario's 8 GPUs; its ClusterQueue, in no queue class,
    is a group of its own, and a queue class label on a pasted object names one."""
    document = steady_scenario(8)
    document["clusterQueues"][0] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "train", "labels": {"berth.dev/queue-class": "training-large"}},
        "spec": {k: v for k, v in document["clusterQueues"][0].items() if k != "name"},
    }
    text = yaml.safe_dump(document)
    answer = org.admin.post(
        URL,
        {
            "source": "scenario",
            "scenario": text,
            "targets": [{"queue": "training-large", "max_wait": "10m"}],
            "seeds": 1,
        },
        format="json",
    )
    assert answer.status_code == 202, answer.content
    plan = answer.json()
    assert plan["workloads"] == 60 and plan["window_start"] is None
    assert execute_plan(plan["id"]) == "succeeded"
    result = CapacityPlan.objects.get(pk=plan["id"]).result
    assert result["groups"] == {"training-large": ["train"]}
    (flavor,) = result["flavors"]
    found = flavor["answers"][0]["gpus"]
    assert found >= 20 and (found - 8) % 8 == 0, found


def test_progress_is_written_only_while_the_plan_runs(org: Org) -> None:
    plan = CapacityPlan.objects.create(source="window", state=WhatIfState.RUNNING)
    write = _Progress(plan.pk, every=0)
    write(3, 10)
    assert CapacityPlan.objects.get(pk=plan.pk).progress == 30
    write(2, 10)  # never backwards
    assert CapacityPlan.objects.get(pk=plan.pk).progress == 30
    write(10, 10)  # 100 is for the end, written when it is closed
    assert CapacityPlan.objects.get(pk=plan.pk).progress == 99
    CapacityPlan.objects.filter(pk=plan.pk).update(state=WhatIfState.FAILED, progress=40)
    _Progress(plan.pk, every=0)(5, 10)
    assert CapacityPlan.objects.get(pk=plan.pk).progress == 40  # a closed plan stays closed


def test_a_plan_past_its_estimate_still_says_it_is_alive_every_minute(org: Org) -> None:
    plan = CapacityPlan.objects.create(source="window", state=WhatIfState.RUNNING)
    clock = iter([0.0, 30.0, 61.0])
    write = _Progress(plan.pk, clock=lambda: next(clock))
    write(12, 10)  # more replays than estimated: 99%
    CapacityPlan.objects.filter(pk=plan.pk).update(heartbeat_at=None)
    write(13, 10)
    assert CapacityPlan.objects.get(pk=plan.pk).heartbeat_at is None  # half a minute on
    write(14, 10)
    alive = CapacityPlan.objects.get(pk=plan.pk)
    assert alive.heartbeat_at is not None and alive.progress == 99
