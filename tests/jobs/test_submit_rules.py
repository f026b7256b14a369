"""Every policy check on submission: a bad request answers 400 naming the
field and the rule, and nothing is stored or created on the cluster."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.models import JobRequest
from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from tests.jobs.conftest import Org, job

URL = "/api/v1/jobs/"
DAY = 24 * 3600


def refused(response: Any, field: str, rule: str) -> None:
    assert response.status_code == 400, response.content
    errors = {(e["field"], e["rule"]) for e in response.json()["errors"]}
    assert (field, rule) in errors, response.json()
    assert JobRequest.objects.count() == 0
    for kind in ("Job", "JobSet", "PyTorchJob", "TrainJob"):
        assert SimulatedBackend().list(TYPES[kind])[0] == []


CASES = [
    ("name", "dns-label", {"name": "Qwen_SFT"}),
    ("name", "job-name-length", {"name": "a" * 41}),
    ("image", "image-reference", {"image": "Registry/UPPER CASE:tag"}),
    ("image", "blank", {"image": ""}),
    ("command", "required", {"command": []}),
    ("queue", "queue-not-allowed", {"queue": "serving"}),
    ("queue", "queue-not-allowed", {"queue": "no-such-queue"}),
    ("checkpoint_uri", "checkpoint-required", {"checkpoint_uri": ""}),
    ("checkpoint_uri", "checkpoint-uri", {"checkpoint_uri": "bucket/qwen"}),
    ("checkpoint_uri", "checkpoint-required",
     {"queue": "eval-batch", "checkpoint_uri": "", "nodes": 1}),
    ("gpus_per_node", "exceeds-node-size", {"gpus_per_node": 16, "nodes": 1}),
    ("nodes", "never-fits", {"nodes": 4}),
    ("max_runtime_seconds", "max-runtime-above-limit", {"max_runtime_seconds": 15 * DAY}),
    ("retries", "retries-above-limit", {"retries": 4}),
    ("justification", "justification-required", {"queue": "urgent-release", "nodes": 1}),
    ("spot_allowed", "spot-not-allowed", {"spot_allowed": True}),
    ("labels.kueue.x-k8s.io/queue-name", "label-reserved",
     {"labels": {"kueue.x-k8s.io/queue-name": "urgent"}}),
    ("labels.owner", "label-value", {"labels": {"owner": "not a label value"}}),
    ("env.MASTER_ADDR", "env-reserved", {"env": {"MASTER_ADDR": "10.0.0.1"}}),
    ("env.1BAD", "env-name", {"env": {"1BAD": "x"}}),
    ("priority_class", "unknown-reference", {"priority_class": "train-urgent"}),
    ("kind", "unsupported-value", {"kind": "MPIJob"}),
    ("nodes", "min_value", {"nodes": 0}),
    ("cpu_per_node", "quantity", {"cpu_per_node": "lots"}),
    ("memory_per_node", "minimum", {"memory_per_node": "0"}),
    ("gpu_count", "unknown-field", {"gpu_count": 8}),
    ("team", "unknown-team", {"team": "serving"}),
    ("namespace", "not-team-namespace", {"team": "research", "namespace": "serving"}),
]  # fmt: skip


@pytest.mark.parametrize(("field", "rule", "change"), CASES, ids=[f"{c[0]}:{c[1]}" for c in CASES])
def test_a_broken_rule_is_refused_naming_the_field(
    org: Org, field: str, rule: str, change: dict[str, Any]
) -> None:
    refused(org.alice.post(URL, job(**change), format="json"), field, rule)


@pytest.mark.parametrize(("field", "rule", "change"), CASES[:8], ids=[c[1] for c in CASES[:8]])
def test_a_dry_run_refuses_the_same(
    org: Org, field: str, rule: str, change: dict[str, Any]
) -> None:
    refused(org.alice.post(URL + "?dry_run=true", job(**change), format="json"), field, rule)


def test_the_never_fits_error_gives_the_numbers(org: Org) -> None:
    response = org.alice.post(URL, job(nodes=4), format="json")
    [error] = [e for e in response.json()["errors"] if e["rule"] == "never-fits"]
    assert "32" in error["message"] and "24" in error["message"], error["message"]
    assert "research" in error["message"]


def test_a_request_too_big_for_the_queue_speaks_of_its_total(org: Org) -> None:
    # 10 nodes × 8 GPUs: 80 in all, where research could hold 16 + 8 borrowed.
    response = org.alice.post(URL, job(nodes=10, gpus_per_node=8), format="json")
    refused(response, "nodes", "never-fits")
    [error] = response.json()["errors"]
    assert error["message"] == (
        "the job asks for 80 GPUs in all (10 nodes × 8 per node), but ClusterQueue research "
        "can never admit more than 24 GPUs in flavor h100, even empty and borrowing all it may "
        "(nominal quota 16 + borrowing limit 8); use at most 3 node(s) of 8 GPUs, "
        "or use a queue with more quota"
    )


def test_a_node_too_big_for_the_queue_is_refused_on_gpus_per_node(org: Org) -> None:
    from tests.factories import cluster_queue
    from tests.jobs.conftest import gpus

    cluster_queue(
        "research-small", team="research", queue_class="interactive-dev",
        resource_groups=gpus(("h100", "4")),
    )  # fmt: skip
    for nodes in (1, 3):  # fewer nodes cannot help: one node is more than it holds
        response = org.alice.post(
            URL, job(queue="research-small", nodes=nodes, gpus_per_node=8), format="json"
        )
        refused(response, "gpus_per_node", "never-fits")
        [error] = response.json()["errors"]
        assert error["message"].startswith(
            f"the job asks for {nodes * 8} GPUs in all ({nodes} node{'s' if nodes > 1 else ''}"
            " × 8 per node), but ClusterQueue research-small can never admit more than 4 GPUs"
        ), error["message"]
        assert error["message"].endswith(
            "(nominal quota 4, and no cohort to borrow from); ask for at most 4 GPUs in all, "
            "or use a queue with more quota"
        ), error["message"]


def test_the_node_size_comes_from_the_synced_nodes(org: Org) -> None:
    from django.utils import timezone

    from jobs.models import CapacitySnapshot

    CapacitySnapshot.objects.create(
        at=timezone.now(), flavor="h100", resource="nvidia.com/gpu", allocatable=32,
        largest_node=4, nodes=8,
    )  # fmt: skip
    response = org.alice.post(URL, job(nodes=2, gpus_per_node=8), format="json")
    refused(response, "gpus_per_node", "exceeds-node-size")
    assert "h100 has 4" in response.json()["errors"][0]["message"]


def test_anonymous_cannot_submit(org: Org) -> None:
    from rest_framework.test import APIClient

    assert APIClient().post(URL, job(), format="json").status_code == 401
    assert JobRequest.objects.count() == 0
