"""Render a job request into the Kubernetes objects Berth creates for it: a
batch/v1 Job (plus a headless Service when it spans nodes), a JobSet, a
PyTorchJob or a TrainJob, suspended and labelled for Kueue, with placement,
resources, grace period, torchrun rendezvous and checkpoint environment.
docs/jobs.md ("What Berth adds to your job") documents each default.

Output is plain dicts with sorted keys: the same spec renders to the same JSON.
Bad input raises ``RenderError`` (a ``ValueError``) naming the field and rule.
This module holds the four kinds; what they are built from is in
``manifest_parts``, the spec and the names on the objects in ``manifest_spec``.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import json
from typing import Any

from jobs.manifest_parts import (
    checkpoint_for,
    container_env,
    container_port,
    container_resources,
    job_object,
    nest,
    placement_fields,
    pod_labels,
    pod_metadata,
    pod_template,
    rendezvous_for,
    validate_spec,
)
from jobs.manifest_spec import (
    CONTAINERS,
    JOB_NAME_LABEL,
    LOOPBACK,
    NODE,
    PYTORCH_PORT_NAME,
    RENDEZVOUS_PORT_NAME,
    RUNTIME_PATCH_MANAGER,
    TRAINER_API_GROUP,
    JobSpec,
)


def _indexed(spec: JobSpec, master: str, backoff_limit: int, **pod: Any) -> dict[str, Any]:
    """An Indexed batch JobSpec of one pod per node, wired for torchrun."""
    ports = [container_port(RENDEZVOUS_PORT_NAME, spec.master_port)] if spec.nodes > 1 else []
    berth_env = rendezvous_for(spec, master)
    return {
        "completionMode": "Indexed",
        "completions": spec.nodes,
        "parallelism": spec.nodes,
        "backoffLimit": backoff_limit,
        "template": pod_template(spec, berth_env, ports, restartPolicy="Never", **pod),
    }


def _batch_job(spec: JobSpec) -> list[dict[str, Any]]:
    multi = spec.nodes > 1
    # Pod i of an Indexed Job is host <job>-<i> in the Service's subdomain.
    master = f"{spec.name}-0.{spec.name}" if multi else LOOPBACK
    pod = {"subdomain": spec.name} if multi else {}
    job_spec = {"suspend": True, **_indexed(spec, master, spec.retries, **pod)}
    if spec.max_runtime_seconds is not None:
        job_spec["activeDeadlineSeconds"] = spec.max_runtime_seconds
    if not multi:
        return [job_object(spec, job_spec)]
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": spec.name, "namespace": spec.namespace, "labels": pod_labels(spec)},
        "spec": {
            "clusterIP": "None",
            # Rank 0 must resolve before every pod is ready.
            "publishNotReadyAddresses": True,
            "selector": {JOB_NAME_LABEL: spec.name},
            "ports": [{"name": RENDEZVOUS_PORT_NAME, "port": spec.master_port, "protocol": "TCP"}],
        },
    }
    return [job_object(spec, job_spec), service]


def _jobset(spec: JobSpec) -> list[dict[str, Any]]:
    multi = spec.nodes > 1
    master = f"{spec.name}-{NODE}-0-0.{spec.name}" if multi else LOOPBACK
    jobset_spec: dict[str, Any] = {
        "suspend": True,
        # A failed pod fails its Job at once and the JobSet restarts as a whole
        # (a gang cannot go on without a member), at most ``retries`` times.
        "failurePolicy": {"maxRestarts": spec.retries},
        "replicatedJobs": [
            {"name": NODE, "replicas": 1, "template": {"spec": _indexed(spec, master, 0)}}
        ],
    }
    if multi:
        jobset_spec["network"] = {
            "enableDNSHostnames": True,
            "publishNotReadyAddresses": True,
            "subdomain": spec.name,
        }
    return [job_object(spec, jobset_spec)]


def _pytorchjob(spec: JobSpec) -> list[dict[str, Any]]:
    # The operator sets MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and PET_*
    # itself (the port from the container port it looks for); Berth adds only
    # what it does not.
    template = pod_template(
        spec,
        {"NPROC_PER_NODE": str(spec.nproc_per_node)},
        [container_port(PYTORCH_PORT_NAME, spec.master_port)],
    )

    def replicas(count: int) -> dict[str, Any]:
        return {"replicas": count, "restartPolicy": "OnFailure", "template": template}

    replica_specs = {"Master": replicas(1)}
    if spec.nodes > 1:
        replica_specs["Worker"] = replicas(spec.nodes - 1)
    run_policy: dict[str, Any] = {
        "suspend": True,
        "backoffLimit": spec.retries,
        # Pods still running when the job ends (a hung worker after the master
        # failed) would hold their GPUs.
        "cleanPodPolicy": "Running",
    }
    if spec.max_runtime_seconds is not None:
        run_policy["activeDeadlineSeconds"] = spec.max_runtime_seconds
    body = {
        "nprocPerNode": str(spec.nproc_per_node),
        "pytorchReplicaSpecs": replica_specs,
        "runPolicy": run_policy,
    }
    return [job_object(spec, body)]


def _trainjob(spec: JobSpec) -> list[dict[str, Any]]:
    # The runtime's torch plugin sets PET_* (rendezvous) itself; the port is the runtime's.
    checkpoint = checkpoint_for(spec.checkpoint_uri)
    trainer: dict[str, Any] = {
        "image": spec.image,
        "env": container_env(spec, {"NPROC_PER_NODE": str(spec.nproc_per_node), **checkpoint.env}),
        "numNodes": spec.nodes,
        "numProcPerNode": spec.nproc_per_node,
    }
    if spec.command:
        trainer["command"] = list(spec.command)
    if resources := container_resources(spec):
        trainer["resourcesPerNode"] = resources
    pod_patch = placement_fields(spec)
    if checkpoint.volumes:
        pod_patch["volumes"] = checkpoint.volumes
        pod_patch["containers"] = [
            {"name": CONTAINERS["TrainJob"], "volumeMounts": checkpoint.mounts}
        ]
    # Placement goes in through a runtime patch (the runtime owns the pod template).
    pod = {"metadata": pod_metadata(spec), "spec": pod_patch}
    replicated_job = {"name": NODE, **nest("template.spec.template", pod)}
    patch = {
        "manager": RUNTIME_PATCH_MANAGER,
        **nest("trainingRuntimeSpec.template.spec.replicatedJobs", [replicated_job]),
    }
    trainjob_spec: dict[str, Any] = {
        "suspend": True,
        "runtimeRef": {
            "apiGroup": TRAINER_API_GROUP,
            "kind": "ClusterTrainingRuntime",
            "name": spec.training_runtime,
        },
        "trainer": trainer,
        "runtimePatches": [patch],
    }
    if spec.max_runtime_seconds is not None:
        trainjob_spec["activeDeadlineSeconds"] = spec.max_runtime_seconds
    return [job_object(spec, trainjob_spec)]


_RENDERERS = {
    "Job": _batch_job,
    "JobSet": _jobset,
    "PyTorchJob": _pytorchjob,
    "TrainJob": _trainjob,
}


def render_job(spec: JobSpec) -> list[dict[str, Any]]:
    """The objects to create, the job itself first (then e.g. a headless Service
    for a multi-node batch Job). Deterministic: sorted keys, stable order."""
    validate_spec(spec)
    return [_canonical(obj) for obj in _RENDERERS[spec.kind](spec)]


def _canonical(obj: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(json.dumps(obj, sort_keys=True))
    return result
