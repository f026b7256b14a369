"""Turn a team's job request into a checked, rendered job: which team and
namespace, which LocalQueue and ClusterQueue, which priority, where its pods
may go, and every policy rule of its queue class. Raises ``PolicyInvalid``
listing every broken rule; nothing is written here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cluster.forecast import Candidate, kueue_pod_sets, never_fits, pod_sets_of
from cluster.state import current_policy
from jobs.destination import choose_queue, priority_of, team_and_namespace
from jobs.flavor_offer import (
    flavors_of,
    largest_node_gpus,
    node_shape,
    split_flavors,
    spot_only_error,
)
from jobs.manifest_spec import JobSpec
from jobs.manifests import render_job
from jobs.models import JobRequest
from jobs.models.requests import TERMINAL_STATES
from jobs.placement import Placement, RenderError, placement_for
from jobs.request_rules import class_rules, own_rules
from queues.errors import FieldError, PolicyInvalid
from queues.models import (
    ClusterQueue,
    LocalQueue,
    QueueClass,
    Team,
)
from queues.quantity import QuantityError, to_canonical

GPU = "nvidia.com/gpu"
DEFAULT_RUNTIME = "torch-distributed"


@dataclass
class Prepared:
    """A request that passed every rule: what to store and what to create."""

    team: Team
    namespace: str
    local_queue: LocalQueue
    cluster_queue: ClusterQueue
    queue_class: QueueClass | None
    priority_class: str
    priority: int
    spot_allowed: bool
    max_runtime_seconds: int | None
    checkpoint_interval_seconds: int | None
    expected_runtime_seconds: int | None
    spec: JobSpec
    manifest: list[dict[str, Any]]
    candidate: Candidate

    def fields(self) -> dict[str, Any]:
        """JobRequest fields (everything but who and when)."""
        spec = self.spec
        return {
            "name": spec.name,
            "team": self.team,
            "namespace": self.namespace,
            "kind": spec.kind,
            "image": spec.image,
            "command": list(spec.command),
            "env": dict(spec.env),
            "nodes": spec.nodes,
            "gpus_per_node": spec.gpus_per_node,
            "cpu_per_node": spec.cpu_per_node_milli,
            "memory_per_node": spec.memory_per_node_bytes,
            "queue_class": self.queue_class.name if self.queue_class else "",
            "local_queue": self.local_queue.name,
            "cluster_queue": self.cluster_queue.name,
            "priority_class": self.priority_class,
            "priority": self.priority,
            "checkpoint_uri": spec.checkpoint_uri,
            "checkpoint_interval_seconds": self.checkpoint_interval_seconds,
            "max_runtime_seconds": self.max_runtime_seconds,
            "retries": spec.retries,
            "spot_allowed": self.spot_allowed,
            "labels": dict(spec.labels),
            "training_runtime": spec.training_runtime if spec.kind == "TrainJob" else "",
            "min_nodes": spec.min_nodes,
            "topology_required": spec.topology_required,
            "topology_preferred": spec.topology_preferred,
            "expected_runtime_seconds": self.expected_runtime_seconds,
            "manifest": self.manifest,
        }


def _render_error(exc: RenderError) -> PolicyInvalid:
    # Placement is the queue's doing, not a field of the request.
    field = "queue" if exc.field == "placement" else exc.field
    return PolicyInvalid.single(field, exc.rule, exc.message)


def _quantity(
    data: Mapping[str, Any], field: str, resource: str, errors: list[FieldError]
) -> int | None:
    value = data.get(field)
    if value in (None, ""):
        return None
    try:
        amount = to_canonical(resource, str(value))
    except QuantityError as exc:
        errors.append(FieldError(field, "quantity", str(exc)))
        return None
    if amount <= 0:
        errors.append(FieldError(field, "minimum", "must be more than zero"))
    return amount


def prepare(actor: Any, data: Mapping[str, Any]) -> Prepared:
    """Resolve, check and render; raises PolicyInvalid with every broken rule."""
    errors = own_rules(data)
    team, namespace = team_and_namespace(actor, data)
    local_queue = choose_queue(team, namespace, data.get("queue") or "")
    queue = local_queue.cluster_queue
    queue_class = queue.queue_class
    class_errors, spot, max_runtime, interval = class_rules(data, queue, queue_class)
    errors.extend(class_errors)
    priority_class, priority = priority_of(data, queue)
    cpu = _quantity(data, "cpu_per_node", "cpu", errors)
    memory = _quantity(data, "memory_per_node", "memory", errors)
    errors.extend(_name_in_use(data.get("name"), namespace))
    flavors = flavors_of(queue)
    allowed, avoided = split_flavors(flavors, spot)
    if flavors and not allowed:
        errors.append(spot_only_error(queue))
    gpus_per_node = int(data.get("gpus_per_node", 0))
    sizes = largest_node_gpus([f.name for f in allowed]) if allowed else {}
    errors.extend(_too_big_for_a_node(gpus_per_node, sizes))
    if errors:
        raise PolicyInvalid(errors)
    try:
        placement: Placement = placement_for(
            [node_shape(f, sizes.get(f.name)) for f in allowed], [node_shape(f) for f in avoided]
        )
    except RenderError as exc:
        raise _render_error(exc) from exc
    spec = JobSpec(
        **_spec_fields(data),
        namespace=namespace,
        team=team.slug,
        gpus_per_node=gpus_per_node,
        local_queue=local_queue.name,
        priority_class=priority_class,
        queue_class=queue_class.name if queue_class else "",
        cpu_per_node_milli=cpu,
        memory_per_node_bytes=memory,
        max_runtime_seconds=max_runtime,
        annotations=_annotations(data, interval),
        placement=placement,
    )
    try:
        manifest = render_job(spec)
    except RenderError as exc:
        raise _render_error(exc) from exc
    candidate = Candidate(
        name=spec.name,
        namespace=namespace,
        cluster_queue=queue.name,
        priority=priority,
        pod_sets=pod_sets_of(kueue_pod_sets(manifest[0])),
        runtime=_runtime(data.get("expected_runtime_seconds"), max_runtime),
        local_queue=local_queue.name,
    )
    raise_if_never_fits(candidate)
    return Prepared(
        team=team,
        namespace=namespace,
        local_queue=local_queue,
        cluster_queue=queue,
        queue_class=queue_class,
        priority_class=priority_class,
        priority=priority,
        spot_allowed=spot,
        max_runtime_seconds=max_runtime,
        checkpoint_interval_seconds=interval,
        expected_runtime_seconds=data.get("expected_runtime_seconds"),
        spec=spec,
        manifest=manifest,
        candidate=candidate,
    )


def _name_in_use(name: Any, namespace: str) -> list[FieldError]:
    if not isinstance(name, str):
        return []  # its own rule says what is wrong with it
    live = JobRequest.objects.filter(namespace=namespace, name=name)
    if not live.exclude(state__in=TERMINAL_STATES).exists():
        return []
    return [
        FieldError(
            "name",
            "name-in-use",
            f"a job named {name} is still live in {namespace}; cancel it or pick another name",
        )
    ]


def _too_big_for_a_node(gpus_per_node: int, sizes: Mapping[str, int]) -> list[FieldError]:
    """More GPUs per node than the largest node of every usable flavor has."""
    if not sizes or gpus_per_node <= max(sizes.values()):
        return []
    return [
        FieldError(
            "gpus_per_node",
            "exceeds-node-size",
            f"{gpus_per_node} GPUs per node, but the largest node of "
            + ", ".join(f"{f} has {n}" for f, n in sorted(sizes.items()))
            + "; use more nodes with fewer GPUs each",
        )
    ]


def _spec_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """The JobSpec fields taken from the request as it is (defaults filled in)."""
    return {
        "name": data["name"],
        "kind": data.get("kind") or "Job",
        "image": data["image"],
        "command": list(data["command"]),
        "nodes": int(data.get("nodes", 1)),
        "env": dict(data.get("env") or {}),
        "checkpoint_uri": data.get("checkpoint_uri") or "",
        "retries": int(data.get("retries") or 0),
        "labels": dict(data.get("labels") or {}),
        "training_runtime": data.get("training_runtime") or DEFAULT_RUNTIME,
        "min_nodes": data.get("min_nodes"),
        "topology_required": data.get("topology_required") or "",
        "topology_preferred": data.get("topology_preferred") or "",
    }


def _runtime(expected: int | None, maximum: int | None) -> float | None:
    """What start estimates take as the job's run time: what the team expects,
    else its limit (a job with neither runs forever as far as estimates know)."""
    chosen = expected or maximum
    return float(chosen) if chosen else None


def raise_if_never_fits(candidate: Candidate) -> None:
    errors = never_fits(current_policy(), candidate)
    if errors:
        raise PolicyInvalid(errors)


def _annotations(data: Mapping[str, Any], interval: int | None) -> dict[str, str]:
    annotations = {}
    if interval:
        annotations["berth.dev/checkpoint-interval-seconds"] = str(interval)
    runtime = data.get("expected_runtime_seconds")
    if runtime:
        # The simulated cluster "runs" the job this long; a real one ignores it.
        annotations["berth.dev/simulated-runtime-seconds"] = str(int(runtime))
    return annotations


__all__ = ["Prepared", "prepare", "raise_if_never_fits"]
