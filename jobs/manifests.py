"""Render a job request into the Kubernetes objects Berth creates for it: a
batch/v1 Job (plus a headless Service when it spans nodes), a JobSet, a
PyTorchJob or a TrainJob, suspended and labelled for Kueue, with placement,
resources, grace period, torchrun rendezvous and checkpoint environment.
docs/jobs.md ("What Berth adds to your job") documents each default.

Output is plain dicts with sorted keys: the same spec renders to the same JSON.
Bad input raises ``RenderError`` (a ``ValueError``) naming the field and rule.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jobs.placement import Placement, RenderError
from queues.names import (
    dns_label_error,
    dns_subdomain_error,
    label_value_error,
    qualified_name_error,
)
from queues.quantity import format_canonical

JOB_KINDS = ("Job", "JobSet", "PyTorchJob", "TrainJob")
API_VERSIONS = {
    "Job": "batch/v1",
    "JobSet": "jobset.x-k8s.io/v1alpha2",
    "PyTorchJob": "kubeflow.org/v1",
    "TrainJob": "trainer.kubeflow.org/v1alpha1",
}

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
# Kueue's cap on admitted time, summed over admissions (preemption does not reset it).
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
# Kueue reads these as the simulated cluster does (queues.simulation.job_kinds).
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
TYPE_LABEL = "workload.ai/type"
FRAMEWORK_LABEL = "workload.ai/framework"
CHECKPOINT_LABEL = "workload.ai/checkpoint"
TEAM_LABEL = "workload.ai/team"
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "berth"
# Label values cannot hold a URI, so the checkpoint location is an annotation.
CHECKPOINT_URI_ANNOTATION = "workload.ai/checkpoint-uri"
# Keys under these prefixes are Berth's and Kueue's: a user value would change
# admission or what the dashboard reports.
RESERVED_LABEL_PREFIXES = ("kueue.x-k8s.io/", "workload.ai/", "berth.dev/", "app.kubernetes.io/")
RESERVED_ANNOTATION_PREFIXES = ("kueue.x-k8s.io/", "workload.ai/")

WORKLOAD_TYPES = {
    "interactive-dev": "interactive",
    "training-large": "training",
    "eval-batch": "evaluation",
    "urgent-release": "release",
}
DEFAULT_WORKLOAD_TYPE = "training"
FRAMEWORK = "pytorch"

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
CONTAINERS = {"Job": "trainer", "JobSet": "trainer", "PyTorchJob": "pytorch", "TrainJob": "node"}
# The JobSet's one replicated job, and the trainer step of Kubeflow's
# torch runtimes (its replicated job and container are both named "node").
NODE = "node"
RENDEZVOUS_PORT_NAME = "rendezvous"
# The training operator reads the master port from this container port.
PYTORCH_PORT_NAME = "pytorchjob-port"
TRAINER_API_GROUP = "trainer.kubeflow.org"
RUNTIME_PATCH_MANAGER = "berth.dev/job-render"
LOOPBACK = "127.0.0.1"
# What the kind's own controller puts in the environment (the Trainer's webhook
# refuses a TrainJob that sets these; the operator's values would win anyway).
_PET = {"PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_NNODES", "PET_NODE_RANK", "PET_NPROC_PER_NODE"}
CONTROLLER_ENV = {
    "PyTorchJob": frozenset({"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", *_PET}),
    "TrainJob": frozenset(_PET),
}

CHECKPOINT_VOLUME = "berth-checkpoint"
CHECKPOINT_MOUNT = "/checkpoint"
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class JobSpec:
    name: str
    namespace: str
    team: str
    kind: str
    image: str
    command: list[str]  # the training command after `--`
    nodes: int
    gpus_per_node: int
    local_queue: str
    priority_class: str
    queue_class: str
    env: dict[str, str] = field(default_factory=dict)
    cpu_per_node_milli: int | None = None
    memory_per_node_bytes: int | None = None
    checkpoint_uri: str = ""
    max_runtime_seconds: int | None = None
    retries: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    placement: Placement = field(default_factory=lambda: Placement({}, []))
    training_runtime: str = "torch-distributed"  # TrainJob's ClusterTrainingRuntime name
    # Kueue's partial admission (kind Job: as few nodes will do) and topology
    # requests (the level, a node label, all the job's nodes share).
    min_nodes: int | None = None
    topology_required: str = ""
    topology_preferred: str = ""
    termination_grace_seconds: int = 300
    gpu_resource: str = "nvidia.com/gpu"
    master_port: int = 29500

    @property
    def nproc_per_node(self) -> int:
        """torchrun processes per node: one per GPU, one for a CPU-only job."""
        return max(1, self.gpus_per_node)


# ----------------------------------------------------------------- validation


def _check_keys(labels: Mapping[str, str], where: str, reserved: tuple[str, ...]) -> None:
    """User labels (``where="labels"``) or annotations: well-formed, and not Berth's."""
    kind = where.removesuffix("s")
    for key, value in sorted(labels.items()):
        if problem := qualified_name_error(key):
            raise RenderError(f"{where}.{key}", f"{kind}-key", problem)
        if key.startswith(reserved):
            raise RenderError(
                f"{where}.{key}",
                f"{kind}-reserved",
                f"{key} is reserved: keys under {key.split('/')[0]}/ are set by Berth or Kueue",
            )
        if not isinstance(value, str):
            raise RenderError(f"{where}.{key}", "type", "must be a string")
        if kind == "label" and (problem := label_value_error(value)):
            raise RenderError(f"{where}.{key}", "label-value", problem)


def _host_names(spec: JobSpec) -> str:
    """The longest pod host name the job's controller will give a pod."""
    last = spec.nodes - 1
    return {
        "Job": f"{spec.name}-{last}",
        "JobSet": f"{spec.name}-{NODE}-0-{last}",
        "TrainJob": f"{spec.name}-{NODE}-0-{last}",
        "PyTorchJob": f"{spec.name}-worker-{last - 1}" if last else f"{spec.name}-master-0",
    }[spec.kind]


def _validate(spec: JobSpec) -> None:
    if spec.kind not in JOB_KINDS:
        raise RenderError("kind", "unsupported-value", "use one of: " + ", ".join(JOB_KINDS))
    # Services are named after the job (and TrainJob demands it): RFC 1035.
    if (problem := dns_label_error(spec.name)) or not spec.name[:1].isalpha():
        raise RenderError(
            "name", "dns-1035-label", problem or "must start with a lowercase letter (RFC 1035)"
        )
    host = _host_names(spec)
    if len(host) > 63:
        raise RenderError(
            "name",
            "host-name-length",
            f"pod host names such as {host} would be {len(host)} characters; at most 63",
        )
    if problem := dns_label_error(spec.namespace):
        raise RenderError("namespace", "dns-label", problem)
    for name, value in (
        ("team", spec.team),
        ("local_queue", spec.local_queue),
        ("priority_class", spec.priority_class),
    ):
        if name != "priority_class" and not value:
            raise RenderError(name, "required", "must not be empty")
        if problem := label_value_error(value):
            raise RenderError(name, "label-value", problem)
    if not spec.image:
        raise RenderError("image", "required", "name the container image")
    if not all(isinstance(part, str) for part in spec.command):
        raise RenderError("command", "type", "every part of the command must be a string")
    limits = (
        ("nodes", spec.nodes, 1, 1024),
        ("gpus_per_node", spec.gpus_per_node, 0, 1024),
        ("retries", spec.retries, 0, INT32_MAX),
        ("termination_grace_seconds", spec.termination_grace_seconds, 0, INT32_MAX),
        ("master_port", spec.master_port, 1, 65535),
        ("max_runtime_seconds", spec.max_runtime_seconds, 1, INT32_MAX),
        ("cpu_per_node_milli", spec.cpu_per_node_milli, 1, None),
        ("memory_per_node_bytes", spec.memory_per_node_bytes, 1, None),
    )
    for name, number, low, high in limits:
        if number is None:
            continue
        if number < low or (high is not None and number > high):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise RenderError(name, "range", f"is {number}; must be {bound}")
    if problem := qualified_name_error(spec.gpu_resource):
        raise RenderError("gpu_resource", "resource-name", problem)
    if spec.kind == "TrainJob" and (problem := dns_subdomain_error(spec.training_runtime)):
        raise RenderError("training_runtime", "dns-subdomain", problem)
    _check_keys(spec.labels, "labels", RESERVED_LABEL_PREFIXES)
    _check_keys(spec.annotations, "annotations", RESERVED_ANNOTATION_PREFIXES)


# ------------------------------------------------------------------ pieces


def workload_type(queue_class: str) -> str:
    return WORKLOAD_TYPES.get(queue_class, DEFAULT_WORKLOAD_TYPE)


def _pod_labels(spec: JobSpec) -> dict[str, str]:
    """Berth's taxonomy (on pods too, so metrics per pod carry it) and the user's."""
    return {
        **spec.labels,
        TYPE_LABEL: workload_type(spec.queue_class),
        FRAMEWORK_LABEL: FRAMEWORK,
        CHECKPOINT_LABEL: "enabled" if spec.checkpoint_uri else "disabled",
        TEAM_LABEL: spec.team,
        MANAGED_BY: MANAGER,
    }


def _job_labels(spec: JobSpec) -> dict[str, str]:
    labels = {**_pod_labels(spec), QUEUE_LABEL: spec.local_queue}
    if spec.priority_class:
        labels[PRIORITY_LABEL] = spec.priority_class
    if spec.max_runtime_seconds is not None:
        labels[MAX_EXEC_TIME_LABEL] = str(spec.max_runtime_seconds)
    return labels


def _metadata(spec: JobSpec, labels: dict[str, str]) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": spec.name, "namespace": spec.namespace, "labels": labels}
    annotations = dict(spec.annotations)
    if spec.kind == "Job" and spec.min_nodes is not None and spec.min_nodes < spec.nodes:
        annotations[MIN_PARALLELISM] = str(spec.min_nodes)
    if spec.checkpoint_uri:
        annotations[CHECKPOINT_URI_ANNOTATION] = spec.checkpoint_uri
    if annotations:
        metadata["annotations"] = annotations
    return metadata


@dataclass
class _Checkpoint:
    env: dict[str, str] = field(default_factory=dict)
    volumes: list[dict[str, Any]] = field(default_factory=list)
    mounts: list[dict[str, Any]] = field(default_factory=list)


def _checkpoint(uri: str) -> _Checkpoint:
    """CHECKPOINT_URI is where checkpoints live; CHECKPOINT_DIR a local path to
    write them to: the mounted claim or export for pvc:// and nfs://, the path
    itself for file://, and an emptyDir staging directory for object stores."""
    if not uri:
        return _Checkpoint()
    scheme, sep, rest = uri.partition("://")
    if not sep or not scheme or not rest:
        raise RenderError("checkpoint_uri", "checkpoint-uri", f"{uri!r} is not a URI")
    mount = [{"name": CHECKPOINT_VOLUME, "mountPath": CHECKPOINT_MOUNT}]
    directory = CHECKPOINT_MOUNT
    if scheme == "file":
        if not rest.startswith("/"):
            raise RenderError(
                "checkpoint_uri", "checkpoint-uri", "a file:// URI needs an absolute path"
            )
        return _Checkpoint({"CHECKPOINT_URI": uri, "CHECKPOINT_DIR": rest})
    if scheme == "pvc":
        claim, _, path = rest.partition("/")
        if problem := dns_subdomain_error(claim):
            raise RenderError("checkpoint_uri", "checkpoint-uri", f"the claim name {problem}")
        source: dict[str, Any] = {"persistentVolumeClaim": {"claimName": claim}}
        if path.strip("/"):
            directory = f"{CHECKPOINT_MOUNT}/{path.strip('/')}"
    elif scheme == "nfs":
        server, _, path = rest.partition("/")
        if not server:
            raise RenderError("checkpoint_uri", "checkpoint-uri", "an nfs:// URI needs a server")
        source = {"nfs": {"server": server, "path": "/" + path.strip("/")}}
    else:
        source = {"emptyDir": {}}
    return _Checkpoint(
        {"CHECKPOINT_URI": uri, "CHECKPOINT_DIR": directory},
        [{"name": CHECKPOINT_VOLUME, **source}],
        mount,
    )


def _rendezvous(spec: JobSpec, master: str) -> dict[str, Any]:
    """torchrun's settings for a batch Job or JobSet, both plain and with
    torchrun's PET_ prefix (which it reads as flag defaults), as the training
    operator sets them for a PyTorchJob: the same command runs on every kind."""
    rank: Any = "0"
    if spec.nodes > 1:
        path = f"metadata.annotations['{COMPLETION_INDEX}']"
        rank = {"valueFrom": {"fieldRef": {"fieldPath": path}}}
    port = str(spec.master_port)
    nproc = str(spec.nproc_per_node)
    return {
        "MASTER_ADDR": master,
        "MASTER_PORT": port,
        "NODE_RANK": rank,
        "NPROC_PER_NODE": nproc,
        "WORLD_SIZE": str(spec.nodes * spec.nproc_per_node),
        "PET_MASTER_ADDR": master,
        "PET_MASTER_PORT": port,
        "PET_NNODES": str(spec.nodes),
        "PET_NODE_RANK": rank,
        "PET_NPROC_PER_NODE": nproc,
    }


def _env(spec: JobSpec, berth: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Berth's variables first, so the user's may refer to them as $(NAME)."""
    for name in sorted(spec.env):
        if name in berth or name in CONTROLLER_ENV.get(spec.kind, ()):
            setter = "Berth" if name in berth else f"the {spec.kind} controller"
            raise RenderError(
                f"env.{name}", "env-reserved", f"{name} is set by {setter}; leave it out"
            )
    listed: list[dict[str, Any]] = []
    for name, value in sorted(berth.items()):
        listed.append({"name": name, **(value if isinstance(value, dict) else {"value": value})})
    listed.extend({"name": name, "value": spec.env[name]} for name in sorted(spec.env))
    return listed


def _resources(spec: JobSpec) -> dict[str, Any]:
    requests: dict[str, str] = {}
    resources: dict[str, Any] = {}
    if spec.cpu_per_node_milli is not None:
        requests["cpu"] = format_canonical("cpu", spec.cpu_per_node_milli)
    if spec.memory_per_node_bytes is not None:
        requests["memory"] = format_canonical("memory", spec.memory_per_node_bytes)
    if spec.gpus_per_node:
        # Extended resources must be given as limits; the request must equal it.
        requests[spec.gpu_resource] = str(spec.gpus_per_node)
        resources["limits"] = {spec.gpu_resource: str(spec.gpus_per_node)}
    if requests:
        resources["requests"] = requests
    return resources


def _container(
    spec: JobSpec, env: list[dict[str, Any]], ports: list[dict[str, Any]], mounts: list[Any]
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": CONTAINERS[spec.kind], "image": spec.image, "env": env}
    if spec.command:
        container["command"] = list(spec.command)
    if resources := _resources(spec):
        container["resources"] = resources
    if ports:
        container["ports"] = ports
    if mounts:
        container["volumeMounts"] = mounts
    return container


def _placement_fields(spec: JobSpec) -> dict[str, Any]:
    fields: dict[str, Any] = {"terminationGracePeriodSeconds": spec.termination_grace_seconds}
    if spec.placement.node_selector:
        fields["nodeSelector"] = dict(spec.placement.node_selector)
    if spec.placement.tolerations:
        fields["tolerations"] = [dict(t) for t in spec.placement.tolerations]
    return fields


def _pod_template(
    spec: JobSpec, berth_env: Mapping[str, Any], ports: list[dict[str, Any]], **pod: Any
) -> dict[str, Any]:
    checkpoint = _checkpoint(spec.checkpoint_uri)
    env = _env(spec, {**berth_env, **checkpoint.env})
    pod_spec: dict[str, Any] = {
        **_placement_fields(spec),
        **pod,
        "containers": [_container(spec, env, ports, checkpoint.mounts)],
    }
    if checkpoint.volumes:
        pod_spec["volumes"] = checkpoint.volumes
    return {"metadata": _pod_metadata(spec), "spec": pod_spec}


def _pod_metadata(spec: JobSpec) -> dict[str, Any]:
    """Pod labels, and the topology level Kueue is asked to keep the pods in."""
    metadata: dict[str, Any] = {"labels": _pod_labels(spec)}
    topology = {
        annotation: level
        for annotation, level in (
            (REQUIRED_TOPOLOGY, spec.topology_required),
            (PREFERRED_TOPOLOGY, spec.topology_preferred),
        )
        if level
    }
    if topology:
        metadata["annotations"] = topology
    return metadata


def _port(name: str, number: int) -> dict[str, Any]:
    return {"name": name, "containerPort": number, "protocol": "TCP"}


def _object(spec: JobSpec, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSIONS[spec.kind],
        "kind": spec.kind,
        "metadata": _metadata(spec, _job_labels(spec)),
        "spec": body,
    }


def _nest(keys: str, leaf: Any) -> Any:
    """``_nest("a.b", x)`` is ``{"a": {"b": x}}``."""
    for key in reversed(keys.split(".")):
        leaf = {key: leaf}
    return leaf


# ------------------------------------------------------------------- kinds


def _indexed(spec: JobSpec, master: str, backoff_limit: int, **pod: Any) -> dict[str, Any]:
    """An Indexed batch JobSpec of one pod per node, wired for torchrun."""
    ports = [_port(RENDEZVOUS_PORT_NAME, spec.master_port)] if spec.nodes > 1 else []
    berth_env = _rendezvous(spec, master)
    return {
        "completionMode": "Indexed",
        "completions": spec.nodes,
        "parallelism": spec.nodes,
        "backoffLimit": backoff_limit,
        "template": _pod_template(spec, berth_env, ports, restartPolicy="Never", **pod),
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
        return [_object(spec, job_spec)]
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": spec.name, "namespace": spec.namespace, "labels": _pod_labels(spec)},
        "spec": {
            "clusterIP": "None",
            # Rank 0 must resolve before every pod is ready.
            "publishNotReadyAddresses": True,
            "selector": {JOB_NAME_LABEL: spec.name},
            "ports": [{"name": RENDEZVOUS_PORT_NAME, "port": spec.master_port, "protocol": "TCP"}],
        },
    }
    return [_object(spec, job_spec), service]


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
    return [_object(spec, jobset_spec)]


def _pytorchjob(spec: JobSpec) -> list[dict[str, Any]]:
    # The operator sets MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and PET_*
    # itself (the port from the container port it looks for); Berth adds only
    # what it does not.
    template = _pod_template(
        spec,
        {"NPROC_PER_NODE": str(spec.nproc_per_node)},
        [_port(PYTORCH_PORT_NAME, spec.master_port)],
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
    return [_object(spec, body)]


def _trainjob(spec: JobSpec) -> list[dict[str, Any]]:
    # The runtime's torch plugin sets PET_* (rendezvous) itself; the port is the runtime's.
    checkpoint = _checkpoint(spec.checkpoint_uri)
    trainer: dict[str, Any] = {
        "image": spec.image,
        "env": _env(spec, {"NPROC_PER_NODE": str(spec.nproc_per_node), **checkpoint.env}),
        "numNodes": spec.nodes,
        "numProcPerNode": spec.nproc_per_node,
    }
    if spec.command:
        trainer["command"] = list(spec.command)
    if resources := _resources(spec):
        trainer["resourcesPerNode"] = resources
    pod_patch = _placement_fields(spec)
    if checkpoint.volumes:
        pod_patch["volumes"] = checkpoint.volumes
        pod_patch["containers"] = [
            {"name": CONTAINERS["TrainJob"], "volumeMounts": checkpoint.mounts}
        ]
    # Placement goes in through a runtime patch (the runtime owns the pod template).
    pod = {"metadata": _pod_metadata(spec), "spec": pod_patch}
    replicated_job = {"name": NODE, **_nest("template.spec.template", pod)}
    patch = {
        "manager": RUNTIME_PATCH_MANAGER,
        **_nest("trainingRuntimeSpec.template.spec.replicatedJobs", [replicated_job]),
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
    return [_object(spec, trainjob_spec)]


_RENDERERS = {
    "Job": _batch_job,
    "JobSet": _jobset,
    "PyTorchJob": _pytorchjob,
    "TrainJob": _trainjob,
}


def render_job(spec: JobSpec) -> list[dict[str, Any]]:
    """The objects to create, the job itself first (then e.g. a headless Service
    for a multi-node batch Job). Deterministic: sorted keys, stable order."""
    _validate(spec)
    return [_canonical(obj) for obj in _RENDERERS[spec.kind](spec)]


def _canonical(obj: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(json.dumps(obj, sort_keys=True))
    return result
