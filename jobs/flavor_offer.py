"""What a queue offers a job: the flavors its class may use (spot only where
the class allows it), the node shape of each, and the largest node's GPUs, as
the submit form, the dry run and ``GET jobs/queues/`` show them."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Max

from cluster.models import CapacitySnapshot
from jobs.placement import FlavorShape, RenderError, placement_for
from queues.choices import CapacityType
from queues.errors import FieldError
from queues.models import (
    ClusterQueue,
    QueueClass,
    ResourceFlavor,
)

GPU = "nvidia.com/gpu"


def flavors_of(queue: ClusterQueue) -> list[ResourceFlavor]:
    """The flavors of the resource group that covers GPUs (else all), in order."""
    quotas = list(queue.quotas.select_related("flavor").order_by("group_index", "flavor_index"))
    groups = {q.group_index for q in quotas if q.resource == GPU} or {q.group_index for q in quotas}
    ordered: list[ResourceFlavor] = []
    for quota in quotas:
        if quota.group_index in groups and quota.flavor not in ordered:
            ordered.append(quota.flavor)
    return ordered


def spot_usable(queue_class: QueueClass | None, requested: bool | None = None) -> bool:
    """Whether a job may land on spot capacity: only where its queue class runs
    jobs on spot, and there unless the request says no (``spot_allowed``)."""
    class_spot = bool(queue_class and queue_class.spot_allowed)
    return class_spot if requested is None else bool(requested) and class_spot


def split_flavors(
    flavors: list[ResourceFlavor], spot: bool
) -> tuple[list[ResourceFlavor], list[ResourceFlavor]]:
    """The flavors a job may land on, and those its pods must be kept off."""
    allowed = [f for f in flavors if spot or f.capacity_type != CapacityType.SPOT]
    return allowed, [f for f in flavors if f not in allowed]


def spot_only_error(queue: ClusterQueue) -> FieldError:
    queue_class = queue.queue_class
    if not spot_usable(queue_class):
        # spot_allowed cannot help: the class refuses spot whatever the request says.
        return FieldError(
            "queue",
            "spot-only-queue",
            f"ClusterQueue {queue.name} has only spot flavors and its queue class "
            f"{queue_class.name if queue_class else '(none)'} does not run jobs on spot "
            "capacity, so no job can run there; use another queue",
        )
    return FieldError(
        "spot_allowed",
        "spot-only-queue",
        f"ClusterQueue {queue.name} has only spot flavors; leave spot_allowed out or set it "
        "to true",
    )


@dataclass(frozen=True)
class QueueOffer:
    """What a job sent to a ClusterQueue may land on, spot left to its queue
    class (``spot_allowed`` unset): decided by the same steps as a submit."""

    spot: bool
    usable: list[ResourceFlavor]
    unusable: dict[str, str]  # flavor → why a job there cannot use it
    problem: str = ""  # why no job can run there at all, if so


def queue_offer(queue: ClusterQueue) -> QueueOffer:
    queue_class = queue.queue_class
    spot = spot_usable(queue_class)
    flavors = flavors_of(queue)
    allowed, avoided = split_flavors(flavors, spot)
    class_name = queue_class.name if queue_class else "(none)"
    unusable = {
        f.name: f"spot capacity, and queue class {class_name} does not run jobs on spot"
        for f in avoided
    }
    problem = ""
    if flavors and not allowed:
        problem = spot_only_error(queue).message
    else:
        try:
            placement_for([node_shape(f) for f in allowed], [node_shape(f) for f in avoided])
        except RenderError as exc:
            problem = exc.message
    return QueueOffer(
        spot=spot, usable=[] if problem else allowed, unusable=unusable, problem=problem
    )


def node_shape(flavor: ResourceFlavor, gpus_per_node: int | None = None) -> FlavorShape:
    return FlavorShape(
        name=flavor.name,
        node_labels=dict(flavor.node_labels),
        node_taints=list(flavor.node_taints),
        tolerations=list(flavor.tolerations),
        spot=flavor.capacity_type == CapacityType.SPOT,
        gpus_per_node=gpus_per_node,
    )


def largest_node_gpus(flavors: list[str]) -> dict[str, int]:
    """GPUs of the biggest node sync saw for each flavor (the default if none)."""
    newest = CapacitySnapshot.objects.filter(flavor__in=flavors, resource=GPU).aggregate(
        at=Max("at")
    )["at"]
    seen: dict[str, int] = {}
    if newest is not None:
        seen = dict(
            CapacitySnapshot.objects.filter(
                at=newest, resource=GPU, flavor__in=flavors
            ).values_list("flavor", "largest_node")
        )
    return {f: seen.get(f) or int(settings.BERTH_NODE_GPUS) for f in flavors}
