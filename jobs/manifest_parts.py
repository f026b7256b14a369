"""The pieces every kind of job object is built from: the spec checked
(``validate_spec``), labels and metadata, the checkpoint volume, torchrun's
rendezvous, environment, resources, the container and the pod template with
its placement. Pure Python: no Django, no kubernetes client."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jobs.manifest_spec import (
    API_VERSIONS,
    CHECKPOINT_LABEL,
    CHECKPOINT_MOUNT,
    CHECKPOINT_URI_ANNOTATION,
    CHECKPOINT_VOLUME,
    COMPLETION_INDEX,
    CONTAINERS,
    CONTROLLER_ENV,
    DEFAULT_WORKLOAD_TYPE,
    FRAMEWORK,
    FRAMEWORK_LABEL,
    INT32_MAX,
    JOB_KINDS,
    MANAGED_BY,
    MANAGER,
    MAX_EXEC_TIME_LABEL,
    MIN_PARALLELISM,
    NODE,
    PREFERRED_TOPOLOGY,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    REQUIRED_TOPOLOGY,
    RESERVED_ANNOTATION_PREFIXES,
    RESERVED_LABEL_PREFIXES,
    TEAM_LABEL,
    TYPE_LABEL,
    WORKLOAD_TYPES,
    JobSpec,
)
from jobs.placement import RenderError
from queues.names import (
    dns_label_error,
    dns_subdomain_error,
    label_value_error,
    qualified_name_error,
)
from queues.quantity import format_canonical

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


def validate_spec(spec: JobSpec) -> None:
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


def pod_labels(spec: JobSpec) -> dict[str, str]:
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
    labels = {**pod_labels(spec), QUEUE_LABEL: spec.local_queue}
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


def checkpoint_for(uri: str) -> _Checkpoint:
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


def rendezvous_for(spec: JobSpec, master: str) -> dict[str, Any]:
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


def container_env(spec: JobSpec, berth: Mapping[str, Any]) -> list[dict[str, Any]]:
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


def container_resources(spec: JobSpec) -> dict[str, Any]:
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
    if resources := container_resources(spec):
        container["resources"] = resources
    if ports:
        container["ports"] = ports
    if mounts:
        container["volumeMounts"] = mounts
    return container


def placement_fields(spec: JobSpec) -> dict[str, Any]:
    fields: dict[str, Any] = {"terminationGracePeriodSeconds": spec.termination_grace_seconds}
    if spec.placement.node_selector:
        fields["nodeSelector"] = dict(spec.placement.node_selector)
    if spec.placement.tolerations:
        fields["tolerations"] = [dict(t) for t in spec.placement.tolerations]
    return fields


def pod_template(
    spec: JobSpec, berth_env: Mapping[str, Any], ports: list[dict[str, Any]], **pod: Any
) -> dict[str, Any]:
    checkpoint = checkpoint_for(spec.checkpoint_uri)
    env = container_env(spec, {**berth_env, **checkpoint.env})
    pod_spec: dict[str, Any] = {
        **placement_fields(spec),
        **pod,
        "containers": [_container(spec, env, ports, checkpoint.mounts)],
    }
    if checkpoint.volumes:
        pod_spec["volumes"] = checkpoint.volumes
    return {"metadata": pod_metadata(spec), "spec": pod_spec}


def pod_metadata(spec: JobSpec) -> dict[str, Any]:
    """Pod labels, and the topology level Kueue is asked to keep the pods in."""
    metadata: dict[str, Any] = {"labels": pod_labels(spec)}
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


def container_port(name: str, number: int) -> dict[str, Any]:
    return {"name": name, "containerPort": number, "protocol": "TCP"}


def job_object(spec: JobSpec, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSIONS[spec.kind],
        "kind": spec.kind,
        "metadata": _metadata(spec, _job_labels(spec)),
        "spec": body,
    }


def nest(keys: str, leaf: Any) -> Any:
    """``nest("a.b", x)`` is ``{"a": {"b": x}}``."""
    for key in reversed(keys.split(".")):
        leaf = {key: leaf}
    return leaf


# ------------------------------------------------------------------- kinds
