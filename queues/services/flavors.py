"""Writes for ResourceFlavors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queues import prices, rules, snapshots
from queues.choices import CapacityType, PolicyKind
from queues.errors import FieldError, PolicyConflict
from queues.models import ResourceFlavor
from queues.services.common import (
    choice_errors,
    immutable_errors,
    in_use,
    object_name_errors,
)
from queues.services.kinds import PolicyKindService, save_fields
from queues.services.topologies import unknown_topology_errors

DEFAULTS: dict[str, Any] = {
    "name": None,
    "description": "",
    "node_labels": {},
    "node_taints": [],
    "tolerations": [],
    "capacity_type": CapacityType.ON_DEMAND.value,
    "topology_name": "",
    prices.FIELD: None,
}


def snapshot(flavor: ResourceFlavor) -> dict[str, Any]:
    """The flavor as the API shows it and history keeps it: its Kueue fields
    and its price per GPU-hour (``"2.50"``, or None when not priced), so every
    price change is a history entry and showback can tell the price in force
    at any moment (``cluster.allocation``)."""
    return {
        **snapshots.resource_flavor(flavor),
        prices.FIELD: prices.price_text(flavor.gpu_hour_price),
    }


def _complete(
    spec: dict[str, Any], data: Mapping[str, Any], existing: ResourceFlavor | None
) -> dict[str, Any]:
    # "2.5" and "2.50" are one price: sent again, it changes nothing.
    return {**spec, prices.FIELD: prices.normalised(spec[prices.FIELD])}


def _validate(spec: dict[str, Any], existing: ResourceFlavor | None) -> list[FieldError]:
    errors = object_name_errors(spec, existing, "flavor")
    if spec.get("name") in (None, ""):  # nothing more to check without it
        return errors
    if existing is not None:
        if existing.topology_name:
            # Kueue's CRD freezes these once a topology is set.
            for field in ("topology_name", "node_labels", "tolerations"):
                errors += immutable_errors(
                    field,
                    getattr(existing, field),
                    spec[field],
                    "Kueue does not allow it to change once topology_name is set",
                )
    elif ResourceFlavor.objects.filter(name=spec["name"]).exists():
        errors.append(
            FieldError("name", "unique", f"a resource flavor named {spec['name']!r} exists")
        )
    errors += rules.node_label_errors("node_labels", spec["node_labels"])
    errors += rules.node_taint_errors("node_taints", spec["node_taints"])
    errors += rules.toleration_errors("tolerations", spec["tolerations"])
    errors += choice_errors("capacity_type", spec["capacity_type"], CapacityType)
    errors += prices.parse_price(prices.FIELD, spec[prices.FIELD])[1]
    if isinstance(spec["node_labels"], Mapping):
        errors += rules.topology_errors(spec["topology_name"], spec["node_labels"])
    topology = spec["topology_name"]
    if topology and not rules.name_errors("topology_name", topology):
        # A malformed name has its own error; only a well-formed one is looked up.
        errors += unknown_topology_errors("topology_name", topology)
    return errors


def _write(spec: dict[str, Any], existing: ResourceFlavor | None, actor: Any) -> ResourceFlavor:
    price, _ = prices.parse_price(prices.FIELD, spec[prices.FIELD])
    stored = {**spec, prices.FIELD: price}
    return save_fields(
        existing or ResourceFlavor(), stored, list(DEFAULTS), is_new=existing is None
    )


def _delete_blocker(flavor: ResourceFlavor) -> PolicyConflict | None:
    quotas = flavor.quotas.select_related("cluster_queue", "cohort")
    return in_use(
        f"flavor {flavor.name!r}",
        {
            "cluster_queues": {q.cluster_queue.name for q in quotas if q.cluster_queue},
            "cohorts": {q.cohort.name for q in quotas if q.cohort},
        },
        "remove it from their resource groups first",
    )


resource_flavors: PolicyKindService[ResourceFlavor] = PolicyKindService(
    kind=PolicyKind.RESOURCE_FLAVOR,
    defaults=DEFAULTS,
    snapshot=snapshot,
    validate=_validate,
    write=_write,
    delete_blocker=_delete_blocker,
    object_name=lambda flavor: flavor.name,
    complete=_complete,
)
