"""Every rendered JobSet, PyTorchJob and TrainJob checked against the real
CRDs with unknown fields refused, their CEL rules and the projects' webhooks
(no database)."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.manifest_spec import JOB_KINDS
from jobs.manifests import render_job
from jobs.placement import Placement
from tests.jobs import crds
from tests.jobs.render_support import (
    GPU,
    job_of,
    make,
)

# ------------------------------------------------------ the CRDs, strictly

SHAPES = [
    {"nodes": 1},
    {"nodes": 4},
    {"nodes": 2, "gpus_per_node": 0, "cpu_per_node_milli": None, "memory_per_node_bytes": None},
    {"nodes": 3, "checkpoint_uri": "pvc://ckpt/a", "placement": Placement({}, [])},
    {"nodes": 2, "checkpoint_uri": "nfs://filer/x", "max_runtime_seconds": None, "retries": 0},
    {"nodes": 2, "checkpoint_uri": "", "labels": {}, "annotations": {}, "env": {}},
]


@pytest.mark.parametrize("kind", JOB_KINDS)
@pytest.mark.parametrize("shape", range(len(SHAPES)))
def test_rendered_jobs_validate_against_the_crds(kind: str, shape: int) -> None:
    assert crds.cluster_errors(render_job(make(kind, **SHAPES[shape]))) == []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(JOB_KINDS),
    nodes=st.integers(1, 64),
    gpus=st.integers(0, 16),
    retries=st.integers(0, 10),
    runtime=st.none() | st.integers(1, 10**6),
    uri=st.sampled_from(["", "s3://b/p", "pvc://claim/p", "file:///mnt/c", "nfs://srv/e"]),
    queue_class=st.sampled_from(["", "interactive-dev", "training-large", "eval-batch"]),
)
def test_any_spec_renders_deterministically_and_validly(
    kind: str, nodes: int, gpus: int, retries: int, runtime: int | None, uri: str, queue_class: str
) -> None:
    spec = make(
        kind,
        nodes=nodes,
        gpus_per_node=gpus,
        retries=retries,
        max_runtime_seconds=runtime,
        checkpoint_uri=uri,
        queue_class=queue_class,
    )
    objects = render_job(spec)
    assert json.dumps(objects) == json.dumps(render_job(spec))
    assert crds.cluster_errors(objects) == []


def test_the_strict_validator_refuses_fields_the_schema_does_not_declare() -> None:
    jobset = job_of(make("JobSet"))
    assert crds.crd_errors(jobset) == []
    bad = copy.deepcopy(jobset)
    bad["spec"]["suspended"] = True
    bad["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0][
        "resource"
    ] = {"limits": {GPU: "8"}}
    bad["metadata"]["label"] = {"oops": "x"}
    errors = crds.crd_errors(bad)
    assert len(errors) == 3
    assert any("'suspended' was unexpected" in e for e in errors)
    assert any("'resource' was unexpected" in e and "containers.0" in e for e in errors)
    assert any("'label' was unexpected" in e for e in errors)
    # The published schema alone would accept (and a server silently drop) them.
    assert crds.schema_errors(crds.schema("JobSet"), bad) == []
    # The same holds for the batch JobSpec embedded in the JobSet CRD.
    job_spec = copy.deepcopy(job_of(make("Job"))["spec"])
    job_spec["template"]["spec"]["nodeSelectors"] = {"gpu": "h100"}
    assert any(
        "'nodeSelectors' was unexpected" in e
        for e in crds.schema_errors(crds.batch_job_spec_schema(), job_spec)
    )


def test_the_strict_validator_leaves_preserved_fields_alone() -> None:
    node = {
        "type": "object",
        "properties": {
            "known": {"type": "string"},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "bare": {"type": "object"},
        },
    }
    strict = crds.strict(node)
    assert crds.schema_errors(strict, {"known": "x", "free": {"anything": {"goes": 1}}}) == []
    assert crds.schema_errors(strict, {"unknown": 1}) != []
    # An object declaring nothing is pruned whole by a server: nothing may go in.
    assert crds.schema_errors(strict, {"bare": {"x": 1}}) != []


@pytest.mark.parametrize("kind", ["JobSet", "PyTorchJob", "TrainJob"])
def test_every_cel_rule_of_the_crds_has_a_python_check(kind: str) -> None:
    unknown = {
        rule
        for rule in crds.cel_rules(kind)
        if not any(marker in rule for marker in crds.UPDATE_ONLY) and rule not in crds.CEL
    }
    assert unknown == set()


def test_the_cel_checks_catch_a_bad_trainjob_name() -> None:
    trainjob = job_of(make("TrainJob"))
    trainjob["metadata"]["name"] = "Train_1"
    assert any("matches" in e for e in crds.cel_errors(trainjob))
    trainjob["metadata"]["name"] = "t" * 64
    assert any("size(self.metadata.name)" in e for e in crds.cel_errors(trainjob))


def test_the_webhook_checks_catch_what_the_projects_refuse() -> None:
    pytorchjob = job_of(make("PyTorchJob"))
    pytorchjob["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    pytorchjob["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0][
        "name"
    ] = "main"
    assert len(crds.webhook_errors(pytorchjob)) == 2
    trainjob = job_of(make("TrainJob"))
    trainjob["spec"]["trainer"]["env"].append({"name": "PET_NNODES", "value": "2"})
    assert crds.webhook_errors(trainjob) == ["trainer.env: PET_NNODES is set by the torch runtime"]
