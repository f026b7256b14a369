"""Writes for Topologies, the levels (block, rack, host) that topology-aware
flavors place pods by."""

from __future__ import annotations

from typing import Any

from queues import snapshots, topology_rules
from queues.choices import PolicyKind
from queues.errors import FieldError, PolicyConflict
from queues.models import ResourceFlavor, Topology
from queues.services.common import immutable_errors, in_use, object_name_errors
from queues.services.kinds import PolicyKindService, save_fields

DEFAULTS: dict[str, Any] = {
    "name": None,
    "description": "",
    "levels": [],
}


def _validate(spec: dict[str, Any], existing: Topology | None) -> list[FieldError]:
    errors = object_name_errors(spec, existing, "topology")
    if spec.get("name") in (None, ""):  # nothing more to check without it
        return errors
    if existing is not None:
        # The CRD's rule on spec.levels is ``self == oldSelf``: the API server
        # would refuse the update, so Berth refuses it first.
        errors += immutable_errors(
            "levels",
            list(existing.levels),
            spec["levels"],
            "Kueue does not allow a Topology's levels to change once it exists; "
            "create a new topology with these levels instead",
        )
    elif Topology.objects.filter(name=spec["name"]).exists():
        errors.append(FieldError("name", "unique", f"a topology named {spec['name']!r} exists"))
    return errors + topology_rules.level_errors("levels", spec["levels"])


def _write(spec: dict[str, Any], existing: Topology | None, actor: Any) -> Topology:
    return save_fields(existing or Topology(), spec, list(DEFAULTS), is_new=existing is None)


def _delete_blocker(topology: Topology) -> PolicyConflict | None:
    # Kueue also freezes a flavor's topology_name once set, so a flavor that
    # names this topology has to be deleted (not edited) to let it go.
    return in_use(
        f"topology {topology.name!r}",
        {
            "resource_flavors": ResourceFlavor.objects.filter(
                topology_name=topology.name
            ).values_list("name", flat=True)
        },
        "delete those flavors first (Kueue does not let a flavor's topology_name change)",
    )


def unknown_topology_errors(field: str, name: str) -> list[FieldError]:
    """A flavor naming a topology Berth does not hold: Kueue would take it and
    leave every queue using the flavor inactive until such a Topology appears."""
    if not name or Topology.objects.filter(name=name).exists():
        return []
    existing = list(Topology.objects.order_by("name").values_list("name", flat=True))
    known = (
        f"the topologies are {', '.join(existing)}"
        if existing
        else "there are no topologies yet; create one first"
    )
    return [FieldError(field, "unknown-topology", f"there is no topology named {name!r}; {known}")]


topologies: PolicyKindService[Topology] = PolicyKindService(
    kind=PolicyKind.TOPOLOGY,
    defaults=DEFAULTS,
    snapshot=snapshots.topology,
    validate=_validate,
    write=_write,
    delete_blocker=_delete_blocker,
    object_name=lambda topology: topology.name,
)
