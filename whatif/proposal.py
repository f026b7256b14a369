"""What-if proposals: today's Kueue policy with some ClusterQueue fields
changed, checked by the engine; errors name the change row and field."""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from cluster.state import ENGINE_KINDS, is_manager_config, manager_config_settings
from queues.engine.model import Policy
from queues.engine.scenario import ScenarioError, parse
from queues.errors import FieldError, PolicyInvalid

log = logging.getLogger(__name__)

# A bigger stream takes the workers too long, and its result would not fit a
# page. Past BERTH_REPLAY_SPLIT_MIN a what-if is shared out among the workers
# (bench/whatif_celery.py measures one at this size).
MAX_WORKLOADS = 100_000
# A capacity plan replays its stream dozens of times, in one process.
MAX_PLAN_WORKLOADS = 20_000
MAX_SCENARIO_BYTES = 2 * 2**20
DEFAULT_WINDOW = timedelta(hours=24)
# Runtime of a recorded workload nobody can tell how long it ran or should run.
DEFAULT_RUNTIME_SECONDS = 3600.0
PROGRESS_EVERY_SECONDS = 0.5
# A running run or plan writes its heartbeat at least this often, progress or
# not, while its worker reports in: the stalled-run sweep (whatif.redrive)
# fails one silent far longer.
ALIVE_EVERY_SECONDS = 60.0
GPU = "nvidia.com/gpu"
NO_LIMIT = "none"  # the value that removes a borrowing or lending limit

# The fields a proposal may change: form name -> what the page calls it.
FIELDS = {
    "nominal_quota": "nominal quota",
    "borrowing_limit": "borrowing limit",
    "lending_limit": "lending limit",
    "fair_sharing_weight": "fair-sharing weight",
    "within_cluster_queue": "preemption within the ClusterQueue",
    "reclaim_within_cohort": "reclaim within the cohort",
    "borrow_within_cohort": "preempt while borrowing within the cohort",
    "fair_sharing": "fair sharing, whole cluster (on or off)",
}
# Fields of Kueue's manager configuration: the whole cluster, no ClusterQueue.
CLUSTER_FIELDS = ("fair_sharing",)
SWITCH_VALUES = {"on": True, "true": True, "off": False, "false": False}
QUOTA_FIELDS = {
    "nominal_quota": "nominalQuota",
    "borrowing_limit": "borrowingLimit",
    "lending_limit": "lendingLimit",
}
# Preemption fields: the path under spec.preemption.
PREEMPTION_FIELDS = {
    "within_cluster_queue": ("withinClusterQueue",),
    "reclaim_within_cohort": ("reclaimWithinCohort",),
    "borrow_within_cohort": ("borrowWithinCohort", "policy"),
}
CHANGE_KEYS = ("cluster_queue", "field", "flavor", "resource", "value")


@dataclass(frozen=True)
class Change:
    """One edit of the proposal: ``field`` of ClusterQueue ``cluster_queue`` (for
    quotas, of its ``flavor`` × ``resource``) becomes ``value``, as written in a
    ClusterQueue spec (Kubernetes quantities, Kueue's enum values)."""

    cluster_queue: str
    field: str
    value: str
    flavor: str = ""
    resource: str = ""

    def as_dict(self) -> dict[str, str]:
        return {key: getattr(self, key) for key in CHANGE_KEYS}

    def describe(self) -> str:
        if self.field in CLUSTER_FIELDS:
            return f"whole cluster: {FIELDS[self.field]} → {self.value}"
        where = f" {self.flavor}/{self.resource}" if self.field in QUOTA_FIELDS else ""
        return f"{self.cluster_queue}{where}: {FIELDS.get(self.field, self.field)} → {self.value}"


# ------------------------------------------------------------------ the policy


def policy_document(objects: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The rendered Kueue objects as a scenario-shaped document (whole objects,
    as ``cluster.state`` feeds the engine), for editing and parsing."""
    document: dict[str, Any] = {key: [] for key in ENGINE_KINDS.values()}
    for obj in objects:
        if is_manager_config(obj):  # fair sharing, waitForPodsReady: as Kueue reads them
            document.update(copy.deepcopy(manager_config_settings(obj)))
            continue
        key = ENGINE_KINDS.get(str(obj.get("kind", "")))
        if key is None:
            continue
        bare: dict[str, Any] = {
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "metadata": {"name": obj["metadata"]["name"]},
        }
        for name in ("spec", "value"):
            if name in obj:
                bare[name] = copy.deepcopy(obj[name])
        document[key].append(bare)
    return document


def _queue_specs(document: Mapping[str, Any]) -> dict[str, tuple[int, dict[str, Any]]]:
    """ClusterQueue name -> (index in clusterQueues, its spec, editable in place).
    Entries are ``{name, ...spec}`` or whole Kueue objects; both are accepted."""
    found: dict[str, tuple[int, dict[str, Any]]] = {}
    entries = document.get("clusterQueues")
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        if not isinstance(entry, dict):
            continue
        if "metadata" in entry or "spec" in entry:
            metadata = entry.get("metadata")
            name = metadata.get("name") if isinstance(metadata, dict) else None
            if not isinstance(entry.get("spec"), dict):
                entry["spec"] = {}
            spec = entry["spec"]
        else:
            name, spec = entry.get("name"), entry
        if isinstance(name, str):
            found.setdefault(name, (i, spec))
    return found


def _quota_slots(spec: Mapping[str, Any]) -> dict[tuple[str, str], tuple[str, dict[str, Any]]]:
    """(flavor, resource) -> (path under the spec, the editable quota entry)."""
    slots: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    groups = spec.get("resourceGroups")
    for g, group in enumerate(groups if isinstance(groups, list) else []):
        flavors = group.get("flavors") if isinstance(group, dict) else None
        for f, flavor in enumerate(flavors if isinstance(flavors, list) else []):
            resources = flavor.get("resources") if isinstance(flavor, dict) else None
            for r, quota in enumerate(resources if isinstance(resources, list) else []):
                if isinstance(quota, dict):
                    key = (str(flavor.get("name")), str(quota.get("name")))
                    path = f"resourceGroups[{g}].flavors[{f}].resources[{r}]"
                    slots.setdefault(key, (path, quota))
    return slots


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def queue_summary(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What the form offers: every ClusterQueue with its quotas, weight and
    preemption settings, as the spec says them."""
    rows = []
    for name, (_, spec) in sorted(_queue_specs(copy.deepcopy(document)).items()):
        preemption = _mapping(spec.get("preemption"))
        fair = _mapping(spec.get("fairSharing"))
        borrow = _mapping(preemption.get("borrowWithinCohort"))
        rows.append(
            {
                "name": name,
                "cohort": spec.get("cohortName") or "",
                "weight": str(fair.get("weight", "1")),
                "within_cluster_queue": preemption.get("withinClusterQueue", "Never"),
                "reclaim_within_cohort": preemption.get("reclaimWithinCohort", "Never"),
                "borrow_within_cohort": borrow.get("policy", "Never"),
                "quotas": [
                    {
                        "flavor": flavor,
                        "resource": resource,
                        "nominal_quota": str(quota.get("nominalQuota", "")),
                        "borrowing_limit": str(quota.get("borrowingLimit", "")),
                        "lending_limit": str(quota.get("lendingLimit", "")),
                    }
                    for (flavor, resource), (_, quota) in _quota_slots(spec).items()
                ],
            }
        )
    return rows


@dataclass
class _Applied:
    """Where one change landed in the document, to name it in the engine's errors."""

    index: int
    queue: str
    path: str  # the exact field path, as the engine reports it
    scope: str  # errors under this path are the change's too


def apply_changes(
    document: Mapping[str, Any], changes: list[tuple[int, Change]], where: str
) -> tuple[dict[str, Any], list[_Applied], list[FieldError]]:
    """A copy of ``document`` with ``changes`` (each with its row number in the
    form) applied to ClusterQueue specs, where each change landed, and the
    changes that name nothing the policy has."""
    edited = copy.deepcopy(dict(document))
    queues = _queue_specs(edited)
    applied: list[_Applied] = []
    errors: list[FieldError] = []
    targets: dict[tuple[str, str, str, str], int] = {}
    for k, change in changes:
        if change.field in CLUSTER_FIELDS:
            spot = _apply_cluster_change(edited, k, change, targets, errors)
        else:
            problems = _queue_change_errors(f"changes[{k}]", change, queues, where)
            errors.extend(problems)
            spot = None if problems else _apply_queue_change(queues, k, change, targets, errors)
        if spot is not None:
            applied.append(spot)
    return edited, applied, errors


def _queue_change_errors(
    prefix: str, change: Change, queues: Mapping[str, Any], where: str
) -> list[FieldError]:
    """What a ClusterQueue change leaves out or names wrong: its queue, its
    field, its value."""
    errors = []
    if not change.cluster_queue:
        errors.append(FieldError(f"{prefix}.cluster_queue", "required", "pick a ClusterQueue"))
    elif change.cluster_queue not in queues:
        known = ", ".join(sorted(queues)[:12]) or "none"
        errors.append(
            FieldError(
                f"{prefix}.cluster_queue",
                "unknown-cluster-queue",
                f"no ClusterQueue named {change.cluster_queue!r} in {where} (it has: {known})",
            )
        )
    if change.field not in FIELDS:
        errors.append(
            FieldError(
                f"{prefix}.field",
                "unsupported-value" if change.field else "required",
                f"{change.field!r} cannot be changed: use one of {', '.join(FIELDS)}"
                if change.field
                else "pick the field to change",
            )
        )
    if not change.value:
        hint = f" (or {NO_LIMIT!r} for no limit)" if change.field in QUOTA_FIELDS else ""
        errors.append(FieldError(f"{prefix}.value", "required", f"give the new value{hint}"))
    return errors


def _apply_queue_change(
    queues: dict[str, tuple[int, dict[str, Any]]],
    k: int,
    change: Change,
    targets: dict[tuple[str, str, str, str], int],
    errors: list[FieldError],
) -> _Applied | None:
    """A change of one ClusterQueue's spec: a quota, its fair-sharing weight or
    a preemption setting."""
    prefix = f"changes[{k}]"
    index, spec = queues[change.cluster_queue]
    base = f"clusterQueues[{index}]"
    if change.field in QUOTA_FIELDS:
        slots = _quota_slots(spec)
        slot = slots.get((change.flavor, change.resource))
        if slot is None:
            errors.extend(_unknown_slot(prefix, change, slots))
            return None
        target = (change.cluster_queue, change.field, change.flavor, change.resource)
        spot = _set_quota(slot, base, k, change)
    elif change.field == "fair_sharing_weight":
        target = (change.cluster_queue, change.field, "", "")
        spot = _set_weight(spec, base, k, change)
    else:
        target = (change.cluster_queue, change.field, "", "")
        spot = _set_preemption(spec, base, k, change)
    if target in targets:
        errors.append(_duplicate(prefix, targets[target]))
        return None
    targets[target] = k
    return spot


def _set_quota(slot: tuple[str, dict[str, Any]], base: str, k: int, change: Change) -> _Applied:
    path, quota = slot
    key = QUOTA_FIELDS[change.field]
    if change.value.lower() == NO_LIMIT and change.field != "nominal_quota":
        quota.pop(key, None)
    else:
        quota[key] = change.value
    return _Applied(k, change.cluster_queue, f"{base}.{path}.{key}", f"{base}.{path}")


def _set_weight(spec: dict[str, Any], base: str, k: int, change: Change) -> _Applied:
    if not isinstance(spec.get("fairSharing"), dict):
        spec["fairSharing"] = {}
    spec["fairSharing"]["weight"] = change.value
    return _Applied(k, change.cluster_queue, f"{base}.fairSharing.weight", f"{base}.fairSharing")


def _set_preemption(spec: dict[str, Any], base: str, k: int, change: Change) -> _Applied:
    if not isinstance(spec.get("preemption"), dict):
        spec["preemption"] = {}
    node = spec["preemption"]
    *parents, leaf = PREEMPTION_FIELDS[change.field]
    for parent in parents:
        if not isinstance(node.get(parent), dict):
            node[parent] = {}
        node = node[parent]
    node[leaf] = change.value
    path = ".".join(PREEMPTION_FIELDS[change.field])
    return _Applied(k, change.cluster_queue, f"{base}.preemption.{path}", f"{base}.preemption")


def _duplicate(prefix: str, earlier: int) -> FieldError:
    return FieldError(
        f"{prefix}.field",
        "duplicate-change",
        f"changes[{earlier}] already changes this; keep one of the two",
    )


def _apply_cluster_change(
    document: dict[str, Any],
    k: int,
    change: Change,
    targets: dict[tuple[str, str, str, str], int],
    errors: list[FieldError],
) -> _Applied | None:
    """A change of Kueue's manager configuration (today: fair sharing on or off)."""
    prefix = f"changes[{k}]"
    if change.cluster_queue:
        errors.append(
            FieldError(
                f"{prefix}.cluster_queue",
                "whole-cluster",
                f"{FIELDS[change.field]} is set for the whole cluster: "
                "leave the ClusterQueue empty",
            )
        )
        return None
    enable = SWITCH_VALUES.get(change.value.strip().lower())
    if enable is None:
        errors.append(
            FieldError(f"{prefix}.value", "on-or-off", f"{change.value!r}: use on or off")
        )
        return None
    target = ("", change.field, "", "")
    if target in targets:
        errors.append(_duplicate(prefix, targets[target]))
        return None
    targets[target] = k
    fair = document.get("fairSharing")
    document["fairSharing"] = {**(fair if isinstance(fair, dict) else {}), "enable": enable}
    return _Applied(k, "", "fairSharing.enable", "fairSharing")


def _unknown_slot(
    prefix: str, change: Change, slots: Mapping[tuple[str, str], Any]
) -> list[FieldError]:
    flavors = sorted({f for f, _ in slots})
    if not change.flavor:
        return [FieldError(f"{prefix}.flavor", "required", "pick the flavor whose quota changes")]
    if change.flavor not in flavors:
        return [
            FieldError(
                f"{prefix}.flavor",
                "unknown-flavor",
                f"{change.cluster_queue} has no quota for flavor {change.flavor!r} (it has: "
                f"{', '.join(flavors) or 'none'}); a what-if changes existing quotas only",
            )
        ]
    resources = sorted(r for f, r in slots if f == change.flavor)
    if not change.resource:
        return [FieldError(f"{prefix}.resource", "required", "pick the resource")]
    return [
        FieldError(
            f"{prefix}.resource",
            "unknown-resource",
            f"{change.cluster_queue} has no {change.resource!r} quota in flavor {change.flavor} "
            f"(it has: {', '.join(resources)})",
        )
    ]


def _readable(path: str, applied: list[_Applied]) -> str:
    """``clusterQueues[3].preemption...`` as ``research: preemption...``."""
    for spot in applied:
        head = spot.scope.split(".", 1)[0]
        if path.startswith(head + "."):
            return f"{spot.queue}: {path[len(head) + 1 :]}"
    return path


def proposal_policy(
    document: Mapping[str, Any], changes: list[tuple[int, Change]], where: str
) -> Policy:
    """Today's document with the changes, parsed by the engine; every problem
    is a FieldError naming the change (and the engine's rule and message)."""
    edited, applied, errors = apply_changes(document, changes, where)
    try:
        policy = parse(edited, "the proposal").policy
    except ScenarioError as exc:  # the changes that did land, checked too
        raise PolicyInvalid(errors + _blame(exc.errors, applied)) from exc
    if errors:
        raise PolicyInvalid(errors)
    return policy


def _blame(engine_errors: list[FieldError], applied: list[_Applied]) -> list[FieldError]:
    blamed = []
    for error in engine_errors:
        exact = next((a for a in applied if a.path == error.field), None)
        spot = exact or next((a for a in applied if error.field.startswith(a.scope + ".")), None)
        if spot is None:
            blamed.append(
                FieldError(
                    "changes", error.rule, f"{_readable(error.field, applied)}: {error.message}"
                )
            )
        elif exact is not None:
            blamed.append(FieldError(f"changes[{spot.index}].value", error.rule, error.message))
        else:
            where = _readable(error.field, applied)
            blamed.append(
                FieldError(f"changes[{spot.index}].value", error.rule, f"{error.message} ({where})")
            )
    return blamed
