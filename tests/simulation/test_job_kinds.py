"""The simulated cluster runs every job kind Berth renders: a batch Job, a
JobSet, a PyTorchJob and a TrainJob each become a Workload with the pod sets
Kueue's integration would make, are unsuspended on admission, suspended again
on eviction, and finish the way their kind reports it."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

from jobs.manifest_spec import JOB_KINDS, JobSpec
from jobs.manifests import render_job
from jobs.placement import Placement
from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from queues.simulation.annotations import RUNTIME
from queues.simulation.job_kinds import KINDS, PodSetTemplate, kind_of
from queues.simulation.kueue import SimulatedKueue
from tests.jobs.crds import schema_errors, strict
from tests.kueue.crds import schema as kueue_schema
from tests.simulation.kueue_support import SPEEDUP, conditions, gpu_usage

POD_SETS = {
    "Job": [("main", 2)],
    "JobSet": [("node", 2)],
    "PyTorchJob": [("master", 1), ("worker", 1)],
    "TrainJob": [("node", 2)],
}
FINISHED = {
    "Job": "Complete",
    "JobSet": "Completed",
    "PyTorchJob": "Succeeded",
    "TrainJob": "Complete",
}
OWNERS = {
    "Job": "batch/v1",
    "JobSet": "jobset.x-k8s.io/v1alpha2",
    "PyTorchJob": "kubeflow.org/v1",
    "TrainJob": "trainer.kubeflow.org/v1alpha1",
}


def rendered(
    kind: str, name: str = "train", nodes: int = 2, gpus: int = 4, priority: str = "low"
) -> list[dict[str, Any]]:
    return render_job(
        JobSpec(
            name=name,
            namespace="team-a",
            team="team-a",
            kind=kind,
            image="registry.example/trainer:1.0",
            command=["torchrun", "train.py", "--resume=auto"],
            nodes=nodes,
            gpus_per_node=gpus,
            cpu_per_node_milli=24_000 * gpus,
            memory_per_node_bytes=256 * gpus * 2**30,
            local_queue="main",
            priority_class=priority,
            queue_class="training-large",
            checkpoint_uri="s3://ckpt/team-a/" + name,
            annotations={RUNTIME: "600"},
            max_runtime_seconds=7200,
            placement=Placement({"gpu": "h100"}, []),
        )
    )


def suspended(job: dict[str, Any]) -> bool:
    kind = kind_of(job)
    assert kind is not None
    return kind.suspended(job)


def submit(backend: SimulatedBackend, objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        backend.create(obj)


def get(backend: SimulatedBackend, kind: str, name: str) -> dict[str, Any]:
    found = backend.get(TYPES[kind], name, "team-a")
    assert found is not None, f"no {kind} {name}"
    return found


@pytest.mark.parametrize("kind", JOB_KINDS)
def test_each_kind_is_admitted_unsuspended_and_finishes(
    backend: SimulatedBackend, kind: str
) -> None:
    kueue = SimulatedKueue(backend, SPEEDUP)
    submit(backend, rendered(kind))
    assert suspended(get(backend, kind, "train"))
    t0 = time.time()

    result = kueue.tick(t0)
    name = f"{kind.lower()}-train"
    assert (result.workloads_created, result.admitted) == (1, [f"team-a/{name}"])
    workload = get(backend, "Workload", name)
    (owner,) = workload["metadata"]["ownerReferences"]
    assert (owner["apiVersion"], owner["kind"], owner["name"]) == (OWNERS[kind], kind, "train")
    assert owner["uid"] == get(backend, kind, "train")["metadata"]["uid"]
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == POD_SETS[kind]
    assert workload["spec"]["priority"] == 10
    assert workload["spec"]["maximumExecutionTimeSeconds"] == 7200
    assert conditions(workload)["Admitted"] == ("True", "Admitted")
    assignments = workload["status"]["admission"]["podSetAssignments"]
    assert [a["name"] for a in assignments] == [name for name, _ in POD_SETS[kind]]
    assert all(a["flavors"]["nvidia.com/gpu"] == "h100" for a in assignments)
    assert gpu_usage(backend) == "8"
    job = get(backend, kind, "train")
    assert not suspended(job)
    assert conditions(job)["Suspended"][0] == "False"

    # 600 s of work at 60x: done after 10 real seconds, the way the kind says it.
    assert kueue.tick(t0 + 9).finished == []
    assert kueue.tick(t0 + 10).finished == [f"team-a/{name}"]
    job = get(backend, kind, "train")
    assert conditions(job)[FINISHED[kind]][0] == "True"
    kind_rules = KINDS[kind]
    assert kind_rules.finished(job)
    assert conditions(get(backend, "Workload", name))["Finished"] == ("True", "Succeeded")
    kueue.tick(t0 + 11)
    assert gpu_usage(backend) == "0"
    # A finished job gets no second workload.
    assert kueue.tick(t0 + 12).workloads_created == 0


def test_a_finished_batch_job_reports_its_completion_time(backend: SimulatedBackend) -> None:
    kueue = SimulatedKueue(backend, SPEEDUP)
    submit(backend, rendered("Job"))
    t0 = time.time()
    kueue.tick(t0)
    assert get(backend, "Job", "train")["status"]["active"] == 2
    kueue.tick(t0 + 10)
    status = get(backend, "Job", "train")["status"]
    assert status["completionTime"] and (status["succeeded"], status["active"]) == (2, 0)


@pytest.mark.parametrize("kind", JOB_KINDS)
def test_each_kind_is_suspended_again_when_preempted(backend: SimulatedBackend, kind: str) -> None:
    kueue = SimulatedKueue(backend, SPEEDUP)
    submit(backend, rendered(kind, "long"))
    t0 = time.time()
    kueue.tick(t0)
    assert not suspended(get(backend, kind, "long"))

    submit(backend, rendered("Job", "urgent", nodes=1, gpus=8, priority="high"))
    result = kueue.tick(t0 + 1)
    assert result.preempted == [f"team-a/{kind.lower()}-long"]
    victim = get(backend, kind, "long")
    assert suspended(victim)
    assert conditions(victim)["Suspended"][0] == "True"
    kueue.tick(t0 + 2)
    assert conditions(get(backend, "Workload", "job-urgent"))["Admitted"] == ("True", "Admitted")


def test_the_workloads_validate_against_kueues_workload_crd(backend: SimulatedBackend) -> None:
    kueue = SimulatedKueue(backend, SPEEDUP)
    for kind in JOB_KINDS:
        submit(backend, rendered(kind, f"w-{kind.lower()}", nodes=1, gpus=1))
    kueue.tick(time.time())
    workload_schema = strict(kueue_schema("Workload"))
    workload_schema["properties"]["metadata"] = {"type": "object"}
    for workload in backend.list(TYPES["Workload"])[0]:
        assert schema_errors(workload_schema, workload) == [], workload["metadata"]["name"]


# ------------------------------------------------------------------ pure


def test_pod_sets_follow_kueues_integrations() -> None:
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js"},
        "spec": {
            "replicatedJobs": [
                {"name": "driver", "template": {"spec": {"template": {"spec": {"a": 1}}}}},
                {
                    "name": "workers",
                    "replicas": 3,
                    "template": {
                        "spec": {"parallelism": 4, "completions": 2, "template": {"spec": {}}}
                    },
                },
            ]
        },
    }
    kind = kind_of(jobset)
    assert kind is not None
    assert kind.pod_sets(jobset) == [
        PodSetTemplate("driver", 1, {"spec": {"a": 1}}),
        PodSetTemplate("workers", 6, {"spec": {}}),
    ]
    trainjob = rendered("TrainJob", nodes=3)[0]
    (node,) = KINDS["TrainJob"].pod_sets(trainjob)
    assert (node.name, node.count) == ("node", 3)
    pod = node.template["spec"]
    assert pod["nodeSelector"] == {"gpu": "h100"}
    assert pod["terminationGracePeriodSeconds"] == 300
    assert pod["containers"] == [
        {
            "name": "node",
            "image": "registry.example/trainer:1.0",
            "resources": trainjob["spec"]["trainer"]["resourcesPerNode"],
        }
    ]
    assert node.template["metadata"]["labels"]["workload.ai/team"] == "team-a"


@pytest.mark.parametrize("kind", JOB_KINDS)
def test_suspend_and_resume_flip_the_kinds_own_field(kind: str) -> None:
    job = copy.deepcopy(rendered(kind)[0])
    rules = KINDS[kind]
    assert rules.suspended(job)
    rules.set_suspended(job, False, 0.0)
    assert not rules.suspended(job) and not rules.finished(job)
    field = job["spec"]["runPolicy"] if kind == "PyTorchJob" else job["spec"]
    assert field["suspend"] is False
    rules.set_suspended(job, True, 1.0)
    assert rules.suspended(job)
    rules.finish(job, 2.0)
    assert rules.finished(job)


def test_kind_of_needs_the_right_api_version() -> None:
    job = rendered("PyTorchJob")[0]
    assert kind_of(job) is KINDS["PyTorchJob"]
    assert kind_of({**job, "apiVersion": "kubeflow.org/v2"}) is None
    assert kind_of({"apiVersion": "v1", "kind": "Service"}) is None
