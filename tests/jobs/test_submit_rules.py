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
    ("queue", "unknown-queue", {"queue": "no-such-queue"}),
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
    ("min_nodes", "job-kind-only",
     {"queue": "research-dev", "kind": "JobSet", "nodes": 2, "min_nodes": 1}),
    ("min_nodes", "range", {"queue": "research-dev", "nodes": 2, "min_nodes": 3}),
    ("min_nodes", "min_value", {"queue": "research-dev", "nodes": 2, "min_nodes": 0}),
    # training-large is a gang class: all of a job's nodes start together.
    ("min_nodes", "gang-required", {"nodes": 2, "min_nodes": 1}),
    ("topology_preferred", "one-of",
     {"topology_required": "topology.berth.dev/rack",
      "topology_preferred": "topology.berth.dev/block"}),
    ("topology_required", "label-key", {"topology_required": "not a label"}),
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


def queue_error(response: Any, rule: str) -> str:
    refused(response, "queue", rule)
    [error] = response.json()["errors"]
    return str(error["message"])


def test_a_queue_class_the_team_has_no_queue_of_says_so_and_what_to_do(org: Org) -> None:
    # serving has a training-large queue and the shared urgent one; nobody has a shared eval-batch.
    message = queue_error(
        org.bob.post(URL, job(queue="eval-batch", nodes=1), format="json"), "no-queue-of-class"
    )
    assert message == (
        "team serving has no eval-batch queue and no shared queue takes eval-batch jobs: ask a "
        "platform admin for one, or submit to one of your team's queues in namespace serving: "
        "serving (training-large), urgent (urgent-release, shared)"
    )


def test_a_shared_queue_of_the_class_is_named_with_how_to_reach_it(org: Org) -> None:
    from queues.models import LocalQueue
    from tests.factories import cluster_queue
    from tests.jobs.conftest import gpus

    cluster_queue(
        "shared-eval", cohort="org", queue_class="eval-batch",
        resource_groups=gpus(("h100", "0"), ("h100-spot", "8")),
    )  # fmt: skip
    # Every namespace gets a LocalQueue for a shared queue, so it is used...
    response = org.bob.post(URL + "?dry_run=true", job(queue="eval-batch", nodes=1), format="json")
    assert response.status_code == 200, response.content
    assert response.json()["cluster_queue"] == "shared-eval"
    # ...unless an admin took serving's away.
    LocalQueue.objects.filter(namespace__name="serving", name="shared-eval").delete()
    message = queue_error(
        org.bob.post(URL, job(queue="eval-batch", nodes=1), format="json"), "no-queue-of-class"
    )
    assert message == (
        "team serving has no eval-batch queue; these shared ones take eval-batch jobs: "
        "shared-eval, but namespace serving has no LocalQueue for them: ask a platform admin "
        "to add one; your team's queues there: serving (training-large), "
        "urgent (urgent-release, shared)"
    )


def test_another_teams_queue_and_an_unknown_name_are_told_apart(org: Org) -> None:
    message = queue_error(
        org.alice.post(URL, job(queue="serving"), format="json"), "queue-not-allowed"
    )
    assert message.startswith("queue serving belongs to team serving; team research may not use")
    message = queue_error(
        org.alice.post(URL, job(queue="trianing-large"), format="json"), "unknown-queue"
    )
    assert message == (
        "namespace research has no queue 'trianing-large' and there is no queue class of that "
        "name; your team's queues there: research (training-large), research-dev "
        "(interactive-dev), research-eval (eval-batch), urgent (urgent-release, shared); "
        "queue classes: eval-batch, interactive-dev, training-large, urgent-release"
    )


def test_limits_and_spot_advice_are_said_in_the_terms_the_request_uses(org: Org) -> None:
    from tests.factories import cluster_queue
    from tests.jobs.conftest import gpus

    response = org.alice.post(URL, job(max_runtime_seconds="15d"), format="json")
    refused(response, "max_runtime_seconds", "max-runtime-above-limit")
    assert response.json()["errors"][0]["message"] == (
        "15d (1296000 s) is more than queue class training-large allows (14d)"
    )
    # A class that runs on spot, a queue with only spot, a job that said no to spot.
    cluster_queue(
        "research-spot", team="research", cohort="org", queue_class="eval-batch",
        resource_groups=gpus(("h100-spot", "8")),
    )  # fmt: skip
    response = org.alice.post(
        URL, job(queue="research-spot", nodes=1, spot_allowed=False), format="json"
    )
    refused(response, "spot_allowed", "spot-only-queue")
    assert response.json()["errors"][0]["message"] == (
        "ClusterQueue research-spot has only spot flavors; leave spot_allowed out or set it to true"
    )


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

    from cluster.models import CapacitySnapshot

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


def test_partial_admission_is_taken_where_the_class_is_no_gang(org: Org) -> None:
    # interactive-dev admits part of a job; training-large (the default) refuses it above.
    response = org.alice.post(
        URL + "?dry_run=true",
        job(queue="research-dev", nodes=2, gpus_per_node=1, min_nodes=1),
        format="json",
    )
    assert response.status_code == 200, response.content
