"""Two real Celery workers (subprocesses of this checkout, on the test Redis
and PostgreSQL) share a capacity plan's replays out: one runs the plan's
search and both replay what it asks for and what it may ask next; the plan's
answers, curve and replay count are exactly those of the search run in one
process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.chaos.harness import wait
from tests.engine.test_capacity import steady
from tests.whatif.celery_workers import SOLO, celery_workers
from whatif.capacity import _checked_again, create_plan, run_search
from whatif.models import CapacityPlan, PlanReplay, ReplayPartState, WhatIfState

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def plan_body() -> dict[str, object]:
    """A 4-GPU job every 10 minutes for 45 (20 GPUs at once) against 8 GPUs,
    2,000 of them: each replay takes a moment, three seeds each."""
    document = steady(8, count=2000)
    document["clusterQueues"][0] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "train", "labels": {"berth.dev/queue-class": "training-large"}},
        "spec": {k: v for k, v in document["clusterQueues"][0].items() if k != "name"},
    }
    return {
        "source": "scenario",
        "scenario": yaml.safe_dump(document),
        "targets": [{"queue": "training-large", "max_wait": "10m"}],
        "seeds": 3,
    }


def test_two_workers_share_a_plans_replays_and_its_result_is_one_processs(
    tmp_path: Path,
) -> None:
    with celery_workers(
        tmp_path, {"a": SOLO, "b": SOLO}, BERTH_REPLAY_SPLIT_MIN="1", BERTH_REPLAY_WORKERS="2"
    ) as tails:
        plan = create_plan(None, plan_body())
        wait(
            lambda: CapacityPlan.objects.get(pk=plan.pk).done,
            lambda: "the plan to end: " + tails(),
            300,
        )
    plan.refresh_from_db()
    assert plan.state == WhatIfState.SUCCEEDED, plan.error
    alone = run_search(_checked_again(plan))  # in this process, one replay after another
    shared = dict(plan.result)
    del shared["seconds"], alone["seconds"]
    assert shared == json.loads(json.dumps(alone))
    rows = list(PlanReplay.objects.filter(plan=plan))
    asked = [r for r in rows if r.asked]
    assert len(asked) == alone["replays"] and all(r.state == ReplayPartState.DONE for r in asked)
    assert {r.worker.split("@")[0] for r in rows if r.state == ReplayPartState.DONE} == {"a", "b"}
    assert bytes(plan.replay_inputs) == b""
