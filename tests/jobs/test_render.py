"""Job-manifest rendering (no database): what every kind carries, the
rendezvous wiring per kind, placement, determinism, refused input, and every
rendered JobSet, PyTorchJob and TrainJob checked against the real CRDs with
unknown fields refused (test_render_crds.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobs.manifest_spec import JOB_KINDS
from jobs.manifests import render_job
from jobs.placement import Placement, RenderError
from tests.jobs.render_support import (
    COMPLETION_INDEX,
    GPU,
    containers,
    env_of,
    job_of,
    make,
    pod_templates,
    suspend_of,
)

# ------------------------------------------------------------ every kind


@pytest.mark.parametrize("kind", JOB_KINDS)
def test_every_kind_is_suspended_and_labelled_for_kueue_and_berth(kind: str) -> None:
    job = job_of(make(kind))
    assert (job["kind"], suspend_of(job)) == (kind, True)
    assert job["metadata"]["labels"] == {
        "kueue.x-k8s.io/queue-name": "research",
        "kueue.x-k8s.io/priority-class": "train-high",
        "kueue.x-k8s.io/max-exec-time-seconds": "86400",
        "workload.ai/type": "training",
        "workload.ai/framework": "pytorch",
        "workload.ai/checkpoint": "enabled",
        "workload.ai/team": "research",
        "app.kubernetes.io/managed-by": "berth",
        "project": "llama",
    }
    # A URI cannot be a label value: it is an annotation.
    assert job["metadata"]["annotations"] == {
        "example.com/owner": "ada",
        "workload.ai/checkpoint-uri": "s3://checkpoints/research/train",
    }
    for template in pod_templates(job):
        labels = template["metadata"]["labels"]
        assert labels["workload.ai/team"] == "research" and labels["project"] == "llama"
        assert not any(key.startswith("kueue.x-k8s.io/") for key in labels)


@pytest.mark.parametrize(
    ("queue_class", "workload_type"),
    [
        ("interactive-dev", "interactive"),
        ("training-large", "training"),
        ("eval-batch", "evaluation"),
        ("urgent-release", "release"),
        ("something-else", "training"),
        ("", "training"),
    ],
)
def test_the_workload_type_follows_the_queue_class(queue_class: str, workload_type: str) -> None:
    assert job_of(make(queue_class=queue_class))["metadata"]["labels"]["workload.ai/type"] == (
        workload_type
    )


@pytest.mark.parametrize("kind", JOB_KINDS)
def test_without_priority_checkpoint_or_deadline_those_stay_out(kind: str) -> None:
    job = job_of(
        make(kind, priority_class="", checkpoint_uri="", max_runtime_seconds=None, annotations={})
    )
    labels = job["metadata"]["labels"]
    assert "kueue.x-k8s.io/priority-class" not in labels
    assert "kueue.x-k8s.io/max-exec-time-seconds" not in labels
    assert labels["workload.ai/checkpoint"] == "disabled"
    assert "annotations" not in job["metadata"]
    assert "activeDeadlineSeconds" not in json.dumps(job)
    for container in containers(job):
        assert not {"CHECKPOINT_URI", "CHECKPOINT_DIR"} & set(env_of(container))


@pytest.mark.parametrize("kind", JOB_KINDS)
def test_every_pod_template_gets_the_placement_and_grace_period(kind: str) -> None:
    job = job_of(make(kind, termination_grace_seconds=120))
    for template in pod_templates(job):
        spec = template["spec"]
        assert spec["nodeSelector"] == {"gpu": "h100", "berth.dev/capacity-type": "on-demand"}
        assert spec["tolerations"] == [
            {"key": "pool", "operator": "Equal", "value": "reserved", "effect": "NoSchedule"}
        ]
        assert spec["terminationGracePeriodSeconds"] == 120
    default = job_of(make(kind, placement=Placement({}, [])))
    for template in pod_templates(default):
        assert template["spec"]["terminationGracePeriodSeconds"] == 300
        assert "nodeSelector" not in template["spec"] and "tolerations" not in template["spec"]


@pytest.mark.parametrize("kind", JOB_KINDS)
def test_gpus_are_requested_and_limited_cpu_and_memory_requested(kind: str) -> None:
    job = job_of(make(kind, cpu_per_node_milli=500, memory_per_node_bytes=64 * 2**30))
    for container in containers(job):
        resources = container.get("resources") or container["resourcesPerNode"]
        assert resources == {
            "requests": {"cpu": "500m", "memory": "64Gi", GPU: "8"},
            "limits": {GPU: "8"},
        }
    cpu_only = job_of(
        make(kind, gpus_per_node=0, cpu_per_node_milli=None, memory_per_node_bytes=None)
    )
    for container in containers(cpu_only):
        assert "resources" not in container and "resourcesPerNode" not in container


def test_another_gpu_resource_name_is_used_as_given() -> None:
    container = containers(job_of(make(gpu_resource="amd.com/gpu")))[0]
    assert container["resources"]["limits"] == {"amd.com/gpu": "8"}


# ------------------------------------------------------ failure policies


def test_a_batch_job_is_indexed_one_pod_per_node_with_backoff_and_deadline() -> None:
    job = job_of(make("Job"))
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 4, 4)
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"]) == (3, 86_400)
    assert spec["template"]["spec"]["restartPolicy"] == "Never"


def test_a_jobset_restarts_as_a_whole_up_to_the_retries() -> None:
    spec = job_of(make("JobSet"))["spec"]
    assert spec["failurePolicy"] == {"maxRestarts": 3}
    (replicated,) = spec["replicatedJobs"]
    job = replicated["template"]["spec"]
    assert (replicated["name"], replicated["replicas"]) == ("node", 1)
    assert (job["completionMode"], job["completions"], job["parallelism"]) == ("Indexed", 4, 4)
    assert job["backoffLimit"] == 0 and job["template"]["spec"]["restartPolicy"] == "Never"
    # JobSet has no deadline of its own: Kueue's max execution time label is it.
    assert "activeDeadlineSeconds" not in json.dumps(spec)


def test_a_pytorchjob_has_backoff_deadline_and_cleans_running_pods() -> None:
    spec = job_of(make("PyTorchJob"))["spec"]
    assert spec["runPolicy"] == {
        "suspend": True,
        "backoffLimit": 3,
        "activeDeadlineSeconds": 86_400,
        "cleanPodPolicy": "Running",
    }
    assert {r["restartPolicy"] for r in spec["pytorchReplicaSpecs"].values()} == {"OnFailure"}


def test_a_trainjob_has_a_deadline() -> None:
    assert job_of(make("TrainJob"))["spec"]["activeDeadlineSeconds"] == 86_400


# ------------------------------------------------------------ rendezvous


def test_a_multi_node_batch_job_gets_a_headless_service_and_torchrun_wiring() -> None:
    job, service = render_job(make("Job"))
    assert service == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "train",
            "namespace": "research",
            "labels": job["spec"]["template"]["metadata"]["labels"],
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {"batch.kubernetes.io/job-name": "train"},
            "ports": [{"name": "rendezvous", "port": 29500, "protocol": "TCP"}],
        },
    }
    pod = job["spec"]["template"]["spec"]
    assert pod["subdomain"] == "train"
    env = env_of(pod["containers"][0])
    assert env == {
        "CHECKPOINT_DIR": "/checkpoint",
        "CHECKPOINT_URI": "s3://checkpoints/research/train",
        "MASTER_ADDR": "train-0.train",
        "MASTER_PORT": "29500",
        "NODE_RANK": COMPLETION_INDEX,
        "NPROC_PER_NODE": "8",
        "WORLD_SIZE": "32",
        "PET_MASTER_ADDR": "train-0.train",
        "PET_MASTER_PORT": "29500",
        "PET_NNODES": "4",
        "PET_NODE_RANK": COMPLETION_INDEX,
        "PET_NPROC_PER_NODE": "8",
        "LR": "3e-4",
    }
    # The user's variables come after Berth's, so they may use $(CHECKPOINT_DIR).
    assert pod["containers"][0]["env"][-1] == {"name": "LR", "value": "3e-4"}
    assert pod["containers"][0]["ports"] == [
        {"name": "rendezvous", "containerPort": 29500, "protocol": "TCP"}
    ]


def test_a_single_node_batch_job_rendezvous_on_loopback_without_a_service() -> None:
    objects = render_job(make("Job", nodes=1, master_port=29400))
    assert [o["kind"] for o in objects] == ["Job"]
    pod = objects[0]["spec"]["template"]["spec"]
    assert "subdomain" not in pod and "ports" not in pod["containers"][0]
    env = env_of(pod["containers"][0])
    assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["NODE_RANK"]) == ("127.0.0.1", "29400", "0")
    assert (env["WORLD_SIZE"], env["PET_NNODES"]) == ("8", "1")


def test_a_multi_node_jobset_uses_its_dns_host_names() -> None:
    spec = job_of(make("JobSet", nodes=2))["spec"]
    assert spec["network"] == {
        "enableDNSHostnames": True,
        "publishNotReadyAddresses": True,
        "subdomain": "train",
    }
    template = spec["replicatedJobs"][0]["template"]["spec"]["template"]
    env = env_of(template["spec"]["containers"][0])
    assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == "train-node-0-0.train"
    assert env["NODE_RANK"] == env["PET_NODE_RANK"] == COMPLETION_INDEX
    assert (env["WORLD_SIZE"], env["PET_NNODES"], env["NPROC_PER_NODE"]) == ("16", "2", "8")


def test_a_single_node_jobset_needs_no_network() -> None:
    spec = job_of(make("JobSet", nodes=1))["spec"]
    assert "network" not in spec
    env = env_of(spec["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0])
    assert (env["MASTER_ADDR"], env["NODE_RANK"]) == ("127.0.0.1", "0")


def test_a_pytorchjob_is_a_master_and_workers_wired_by_the_operator() -> None:
    spec = job_of(make("PyTorchJob", nodes=3, master_port=23456))["spec"]
    replicas = spec["pytorchReplicaSpecs"]
    assert {k: r["replicas"] for k, r in replicas.items()} == {"Master": 1, "Worker": 2}
    assert spec["nprocPerNode"] == "8"
    for replica in replicas.values():
        (container,) = replica["template"]["spec"]["containers"]
        assert container["name"] == "pytorch"
        assert container["ports"] == [
            {"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}
        ]
        # The operator sets the rendezvous variables; Berth does not duplicate them.
        assert set(env_of(container)) == {
            "CHECKPOINT_DIR",
            "CHECKPOINT_URI",
            "NPROC_PER_NODE",
            "LR",
        }
    single = job_of(make("PyTorchJob", nodes=1))["spec"]["pytorchReplicaSpecs"]
    assert list(single) == ["Master"] and single["Master"]["replicas"] == 1


def test_a_trainjob_names_its_runtime_and_patches_in_the_placement() -> None:
    spec = job_of(make("TrainJob", nodes=2, training_runtime="torch-cuda-128"))["spec"]
    assert spec["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
        "name": "torch-cuda-128",
    }
    trainer = spec["trainer"]
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (2, 8)
    assert trainer["image"] == "registry.example/trainer:1.0"
    assert trainer["command"] == ["torchrun", "train.py", "--resume=auto"]
    assert set(env_of(trainer)) == {"CHECKPOINT_DIR", "CHECKPOINT_URI", "NPROC_PER_NODE", "LR"}
    (patch,) = spec["runtimePatches"]
    assert patch["manager"] == "berth.dev/job-render"
    replicated = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert [r["name"] for r in replicated] == ["node"]
    pod = replicated[0]["template"]["spec"]["template"]["spec"]
    assert pod["containers"] == [
        {"name": "node", "volumeMounts": [{"name": "berth-checkpoint", "mountPath": "/checkpoint"}]}
    ]
    assert pod["volumes"] == [{"name": "berth-checkpoint", "emptyDir": {}}]


@pytest.mark.parametrize(
    ("uri", "directory", "volume"),
    [
        ("s3://bucket/run", "/checkpoint", {"emptyDir": {}}),
        ("gs://bucket/run", "/checkpoint", {"emptyDir": {}}),
        (
            "pvc://team-ckpt/runs/train/",
            "/checkpoint/runs/train",
            {"persistentVolumeClaim": {"claimName": "team-ckpt"}},
        ),
        ("pvc://team-ckpt", "/checkpoint", {"persistentVolumeClaim": {"claimName": "team-ckpt"}}),
        (
            "nfs://filer.lan/exports/ckpt",
            "/checkpoint",
            {"nfs": {"server": "filer.lan", "path": "/exports/ckpt"}},
        ),
        ("file:///mnt/shared/ckpt", "/mnt/shared/ckpt", None),
    ],
)
def test_the_checkpoint_env_gives_a_uri_and_a_local_directory(
    uri: str, directory: str, volume: dict[str, Any] | None
) -> None:
    pod = job_of(make("Job", checkpoint_uri=uri))["spec"]["template"]["spec"]
    env = env_of(pod["containers"][0])
    assert (env["CHECKPOINT_URI"], env["CHECKPOINT_DIR"]) == (uri, directory)
    if volume is None:
        assert "volumes" not in pod and "volumeMounts" not in pod["containers"][0]
    else:
        assert pod["volumes"] == [{"name": "berth-checkpoint", **volume}]
        assert pod["containers"][0]["volumeMounts"] == [
            {"name": "berth-checkpoint", "mountPath": "/checkpoint"}
        ]


def test_the_command_is_used_as_given() -> None:
    """Berth never rewrites the command (``--resume=auto`` is the script's)."""
    command = ["bash", "-c", "torchrun train.py --resume=auto --lr $(LR)"]
    assert containers(job_of(make(command=command)))[0]["command"] == command
    assert "command" not in containers(job_of(make(command=[])))[0]


# ---------------------------------------------------------- determinism


def test_the_same_spec_renders_to_the_same_json_with_sorted_keys() -> None:
    for kind in JOB_KINDS:
        first = json.dumps(render_job(make(kind)))
        assert first == json.dumps(render_job(make(kind)))
        assert first == json.dumps(json.loads(first), sort_keys=True)
        # Dict order of the input does not leak into the output.
        shuffled = make(kind, env={"B": "2", "A": "1"}, labels={"z": "1", "a": "2"})
        again = make(kind, env={"A": "1", "B": "2"}, labels={"a": "2", "z": "1"})
        assert json.dumps(render_job(shuffled)) == json.dumps(render_job(again))


# --------------------------------------------------------- refused input


@pytest.mark.parametrize(
    "label",
    [
        "kueue.x-k8s.io/queue-name",
        "kueue.x-k8s.io/priority-class",
        "workload.ai/type",
        "workload.ai/team",
        "workload.ai/anything",
        "app.kubernetes.io/managed-by",
        "berth.dev/team",
    ],
)
def test_a_user_label_may_not_override_berths(label: str) -> None:
    with pytest.raises(ValueError, match=label.replace(".", r"\.")) as caught:
        render_job(make(labels={label: "mine"}))
    assert isinstance(caught.value, RenderError)
    assert (caught.value.field, caught.value.rule) == (f"labels.{label}", "label-reserved")


@pytest.mark.parametrize(
    ("overrides", "field", "rule"),
    [
        (
            {"annotations": {"workload.ai/checkpoint-uri": "s3://x"}},
            "annotations.workload.ai/checkpoint-uri",
            "annotation-reserved",
        ),
        ({"labels": {"bad key": "x"}}, "labels.bad key", "label-key"),
        ({"labels": {"project": "not a value"}}, "labels.project", "label-value"),
        ({"env": {"MASTER_ADDR": "x"}}, "env.MASTER_ADDR", "env-reserved"),
        ({"env": {"CHECKPOINT_DIR": "/x"}}, "env.CHECKPOINT_DIR", "env-reserved"),
        ({"env": {"PET_NNODES": "2"}}, "env.PET_NNODES", "env-reserved"),
        ({"kind": "MPIJob"}, "kind", "unsupported-value"),
        ({"name": "9lives"}, "name", "dns-1035-label"),
        ({"name": "Train"}, "name", "dns-1035-label"),
        ({"name": "x" * 62}, "name", "host-name-length"),
        ({"nodes": 0}, "nodes", "range"),
        ({"gpus_per_node": -1}, "gpus_per_node", "range"),
        ({"retries": -1}, "retries", "range"),
        ({"max_runtime_seconds": 0}, "max_runtime_seconds", "range"),
        ({"master_port": 70000}, "master_port", "range"),
        ({"team": ""}, "team", "required"),
        ({"checkpoint_uri": "not-a-uri"}, "checkpoint_uri", "checkpoint-uri"),
        ({"checkpoint_uri": "file://relative/path"}, "checkpoint_uri", "checkpoint-uri"),
        ({"kind": "TrainJob", "training_runtime": ""}, "training_runtime", "dns-subdomain"),
    ],
)
def test_bad_input_names_the_field_and_rule(
    overrides: dict[str, Any], field: str, rule: str
) -> None:
    with pytest.raises(RenderError) as caught:
        render_job(make(**overrides))
    assert (caught.value.field, caught.value.rule) == (field, rule)
    assert str(caught.value).startswith(f"{field}: ")


@pytest.mark.parametrize(
    ("kind", "variable"),
    [("PyTorchJob", "MASTER_ADDR"), ("PyTorchJob", "RANK"), ("TrainJob", "PET_NNODES")],
)
def test_variables_the_kinds_controller_sets_are_refused_too(kind: str, variable: str) -> None:
    with pytest.raises(RenderError, match=f"the {kind} controller") as caught:
        render_job(make(kind, env={variable: "x"}))
    assert (caught.value.field, caught.value.rule) == (f"env.{variable}", "env-reserved")


# ------------------------------------------------- topology and partial admission

RACK = "topology.berth.dev/rack"


@pytest.mark.parametrize("kind", JOB_KINDS)
@pytest.mark.parametrize("level", ["required", "preferred"])
def test_a_topology_request_reaches_every_pod_set_kueue_builds(kind: str, level: str) -> None:
    """Kueue reads the podset-*-topology annotation off each pod template into
    the Workload's topologyRequest; the simulated cluster's job kinds do too."""
    from queues.simulation.job_kinds import kind_of

    job = job_of(make(kind, **{f"topology_{level}": RACK}))
    for template in pod_templates(job):
        assert template["metadata"]["annotations"] == {
            f"kueue.x-k8s.io/podset-{level}-topology": RACK
        }
    found = kind_of(job)
    assert found is not None
    pod_sets = [p.as_dict() for p in found.pod_sets(job)]
    assert pod_sets and all(p["topologyRequest"] == {level: RACK} for p in pod_sets)
    assert all("annotations" not in t["metadata"] for t in pod_templates(job_of(make(kind))))


def test_a_batch_job_asks_kueue_for_its_minimum_parallelism() -> None:
    from queues.simulation.job_kinds import kind_of

    job = job_of(make("Job", min_nodes=2))
    assert job["metadata"]["annotations"]["kueue.x-k8s.io/job-min-parallelism"] == "2"
    found = kind_of(job)
    assert found is not None
    (pod_set,) = [p.as_dict() for p in found.pod_sets(job)]
    assert (pod_set["count"], pod_set["minCount"]) == (4, 2)
    # As many as it asks for: nothing to reduce, no annotation.
    assert "kueue.x-k8s.io/job-min-parallelism" not in job_of(make("Job", min_nodes=4))[
        "metadata"
    ].get("annotations", {})
