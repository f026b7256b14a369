"""Reading a scenario's policy objects: ResourceFlavors, Cohorts, ClusterQueues
and WorkloadPriorityClasses, each given Kueue's way (a whole object, or its spec
with a name), checked with the shared policy rules, then checked together
(every flavor named exists, cohorts form a tree). Most of a scenario is policy,
so reading it has a module of its own; ``queues.engine.scenario`` reads the
file and the rest.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queues import quota_rules
from queues import rules as policy_rules
from queues.engine.model import (
    BorrowWithinCohort,
    ClusterQueue,
    Cohort,
    FlavorFungibility,
    FlavorQuotas,
    FungibilityAction,
    FungibilityPreference,
    Policy,
    Preemption,
    QueueingStrategy,
    Quota,
    ReclaimWithinCohort,
    ResourceFlavor,
    ResourceGroup,
    StopPolicy,
    WithinClusterQueue,
)
from queues.engine.reading import Reader, read_labels, read_taints, read_tolerations


def unwrap(reader: Reader, path: str, entry: Any) -> tuple[str | None, Mapping[str, Any]]:
    """An entry is either ``{name, ...spec fields}`` or a whole Kueue object
    ``{apiVersion, kind, metadata: {name}, spec: {...}}``."""
    if not isinstance(entry, Mapping):
        reader.error(path, "type", "must be a mapping")
        return None, {}
    if "metadata" in entry or "spec" in entry:
        outer = reader.mapping(
            path, entry, ("apiVersion", "kind", "metadata", "spec", "value", "description")
        )
        metadata = outer.get("metadata") or {}
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        spec = dict(outer.get("spec") or {})
        for extra in ("value", "description"):  # WorkloadPriorityClass keeps them at top level
            if extra in outer:
                spec[extra] = outer[extra]
        return name, spec
    spec = dict(entry)
    return spec.pop("name", None), spec


# Kueue's camelCase quota fields <-> the snake_case the shared policy rules use.
_QUOTA_KEYS = {
    "coveredResources": "covered_resources",
    "nominalQuota": "nominal_quota",
    "borrowingLimit": "borrowing_limit",
    "lendingLimit": "lending_limit",
}


def _snake(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {_QUOTA_KEYS.get(k, k): _snake(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_snake(v) for v in value]
    return value


def _camel_path(path: str) -> str:
    for camel, snake in _QUOTA_KEYS.items():
        path = path.replace(snake, camel)
    return path


def read_resource_groups(
    reader: Reader, path: str, raw: Any, *, has_parent: bool, owner: str
) -> tuple[ResourceGroup, ...]:
    for g, group in enumerate(raw if isinstance(raw, list) else []):
        reader.mapping(f"{path}[{g}]", group, ("coveredResources", "flavors"))
        if not isinstance(group, Mapping):
            continue
        for f, flavor in enumerate(group.get("flavors") or []):
            reader.mapping(f"{path}[{g}].flavors[{f}]", flavor, ("name", "resources"))
            if not isinstance(flavor, Mapping):
                continue
            for r, resource in enumerate(flavor.get("resources") or []):
                reader.mapping(
                    f"{path}[{g}].flavors[{f}].resources[{r}]",
                    resource,
                    ("name", "nominalQuota", "borrowingLimit", "lendingLimit"),
                )
    groups, errors = quota_rules.parse_resource_groups(
        _snake(raw), field="resource_groups", has_parent=has_parent, owner=owner
    )
    for error in errors:
        reader.error(
            _camel_path(error.field.replace("resource_groups", path, 1)), error.rule, error.message
        )
    return tuple(
        ResourceGroup(
            covered_resources=group.covered_resources,
            flavors=tuple(
                FlavorQuotas(
                    flavor=fq.name,
                    resources={
                        q.name: Quota(q.nominal_quota, q.borrowing_limit, q.lending_limit)
                        for q in fq.resources
                    },
                )
                for fq in group.flavors
            ),
        )
        for group in groups
    )


def read_flavors(reader: Reader, raw: Any) -> dict[str, ResourceFlavor]:
    flavors: dict[str, ResourceFlavor] = {}
    for i, entry in enumerate(reader.items("resourceFlavors", raw)):
        path = f"resourceFlavors[{i}]"
        name, spec = unwrap(reader, path, entry)
        name = reader.name(f"{path}.name", name)
        spec = reader.mapping(
            path, spec, ("nodeLabels", "nodeTaints", "tolerations", "topologyName")
        )
        if name in flavors:
            reader.error(f"{path}.name", "duplicate", f"flavor {name!r} is defined twice")
        flavors[name] = ResourceFlavor(
            name=name,
            node_labels=read_labels(reader, f"{path}.nodeLabels", spec.get("nodeLabels")),
            node_taints=read_taints(reader, f"{path}.nodeTaints", spec.get("nodeTaints")),
            tolerations=read_tolerations(reader, f"{path}.tolerations", spec.get("tolerations")),
            topology_name=read_optional_name(reader, f"{path}.topologyName", spec, "topologyName")
            or None,
        )
    return flavors


def read_optional_name(reader: Reader, path: str, spec: Mapping[str, Any], key: str) -> str | None:
    """A name that may be left out. One of another type (a YAML
    ``cohortName: 2024`` or ``yes``) is reported, never passed on: the
    compiled engine's classes refuse it as they are built, before the
    errors could be reported together."""
    value = spec.get(key)
    if value is None or isinstance(value, str):
        return value
    reader.error(path, "required", "must be a name")
    return None


def read_fair_sharing_weight(reader: Reader, path: str, spec: Mapping[str, Any]) -> float:
    """A cohort's or a cluster queue's ``fairSharing.weight``."""
    fair = reader.mapping(f"{path}.fairSharing", spec.get("fairSharing"), ("weight",))
    return reader.weight(f"{path}.fairSharing.weight", fair.get("weight"))


def read_cohorts(reader: Reader, raw: Any) -> dict[str, Cohort]:
    cohorts: dict[str, Cohort] = {}
    for i, entry in enumerate(reader.items("cohorts", raw)):
        path = f"cohorts[{i}]"
        name, spec = unwrap(reader, path, entry)
        name = reader.name(f"{path}.name", name)
        spec = reader.mapping(path, spec, ("parentName", "resourceGroups", "fairSharing"))
        parent = read_optional_name(reader, f"{path}.parentName", spec, "parentName")
        if parent is not None:
            reader.name(f"{path}.parentName", parent)
        if name in cohorts:
            reader.error(f"{path}.name", "duplicate", f"cohort {name!r} is defined twice")
        cohorts[name] = Cohort(
            name=name,
            parent=parent,
            resource_groups=read_resource_groups(
                reader,
                f"{path}.resourceGroups",
                spec.get("resourceGroups"),
                has_parent=parent is not None,
                owner="cohort",
            ),
            fair_sharing_weight=read_fair_sharing_weight(reader, path, spec),
        )
    return cohorts


CQ_FIELDS = (
    "cohortName",
    "resourceGroups",
    "queueingStrategy",
    "preemption",
    "fairSharing",
    "flavorFungibility",
    "admissionChecks",
    "admissionChecksStrategy",
    "stopPolicy",
    "namespaceSelector",
    "admissionScope",
)
ADMISSION_MODES = ("UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing")


def read_cluster_queues(reader: Reader, raw: Any) -> dict[str, ClusterQueue]:
    queues: dict[str, ClusterQueue] = {}
    for i, entry in enumerate(reader.items("clusterQueues", raw)):
        path = f"clusterQueues[{i}]"
        name, spec = unwrap(reader, path, entry)
        name = reader.name(f"{path}.name", name)
        spec = reader.mapping(path, spec, CQ_FIELDS)
        cohort = read_optional_name(reader, f"{path}.cohortName", spec, "cohortName")
        if cohort is not None:
            reader.name(f"{path}.cohortName", cohort)
        if name in queues:
            reader.error(f"{path}.name", "duplicate", f"cluster queue {name!r} is defined twice")
        queues[name] = ClusterQueue(
            name=name,
            cohort=cohort,
            resource_groups=read_resource_groups(
                reader,
                f"{path}.resourceGroups",
                spec.get("resourceGroups"),
                has_parent=cohort is not None,
                owner="cluster queue",
            ),
            queueing_strategy=reader.option(
                path, spec, "queueingStrategy", QueueingStrategy, QueueingStrategy.BEST_EFFORT_FIFO
            ),
            preemption=read_preemption(reader, f"{path}.preemption", spec.get("preemption")),
            fair_sharing_weight=read_fair_sharing_weight(reader, path, spec),
            flavor_fungibility=read_fungibility(
                reader, f"{path}.flavorFungibility", spec.get("flavorFungibility")
            ),
            admission_checks=read_admission_checks(reader, path, spec),
            stop_policy=reader.option(path, spec, "stopPolicy", StopPolicy, StopPolicy.NONE),
            admission_mode=read_admission_mode(reader, path, spec.get("admissionScope")),
        )
    return queues


def read_admission_mode(reader: Reader, path: str, raw: Any) -> str | None:
    """``admissionScope.admissionMode`` (admission fair sharing): checked and kept;
    the engine does not order by usage yet (README: simplifications)."""
    block = reader.mapping(f"{path}.admissionScope", raw, ("admissionMode",))
    mode = block.get("admissionMode")
    if mode is not None and mode not in ADMISSION_MODES:
        reader.error(
            f"{path}.admissionScope.admissionMode",
            "unsupported-value",
            f"{mode!r} is not supported: use one of {', '.join(ADMISSION_MODES)}",
        )
        return None
    return mode if isinstance(mode, str) else None


def read_preemption(reader: Reader, path: str, raw: Any) -> Preemption:
    spec = reader.mapping(
        path, raw, ("withinClusterQueue", "reclaimWithinCohort", "borrowWithinCohort")
    )
    borrow = reader.mapping(
        f"{path}.borrowWithinCohort",
        spec.get("borrowWithinCohort"),
        ("policy", "maxPriorityThreshold"),
    )
    preemption = Preemption(
        within_cluster_queue=reader.option(
            path, spec, "withinClusterQueue", WithinClusterQueue, WithinClusterQueue.NEVER
        ),
        reclaim_within_cohort=reader.option(
            path, spec, "reclaimWithinCohort", ReclaimWithinCohort, ReclaimWithinCohort.NEVER
        ),
        borrow_within_cohort=reader.option(
            f"{path}.borrowWithinCohort",
            borrow,
            "policy",
            BorrowWithinCohort,
            BorrowWithinCohort.NEVER,
        ),
        max_priority_threshold=reader.integer(
            f"{path}.borrowWithinCohort.maxPriorityThreshold", borrow.get("maxPriorityThreshold")
        ),
    )
    for error in policy_rules.preemption_errors(
        reclaim_within_cohort=preemption.reclaim_within_cohort.value,
        borrow_within_cohort_policy=preemption.borrow_within_cohort.value,
        max_priority_threshold=preemption.max_priority_threshold,
    ):
        reader.error(f"{path}.{_PREEMPTION_PATHS[error.field]}", error.rule, error.message)
    return preemption


_PREEMPTION_PATHS = {
    "borrow_within_cohort_policy": "borrowWithinCohort.policy",
    "borrow_within_cohort_max_priority_threshold": "borrowWithinCohort.maxPriorityThreshold",
}


def read_fungibility(reader: Reader, path: str, raw: Any) -> FlavorFungibility:
    spec = reader.mapping(path, raw, ("whenCanBorrow", "whenCanPreempt", "preference"))
    fungibility = FlavorFungibility(
        when_can_borrow=reader.option(
            path, spec, "whenCanBorrow", FungibilityAction, FungibilityAction.MAY_STOP_SEARCH
        ),
        when_can_preempt=reader.option(
            path, spec, "whenCanPreempt", FungibilityAction, FungibilityAction.TRY_NEXT_FLAVOR
        ),
        preference=reader.option(
            path, spec, "preference", FungibilityPreference, FungibilityPreference.NONE
        ),
    )
    for error in policy_rules.fungibility_errors(
        when_can_borrow=fungibility.when_can_borrow.value,
        when_can_preempt=fungibility.when_can_preempt.value,
        preference=fungibility.preference.value,
    ):
        reader.error(f"{path}.preference", error.rule, error.message)
    return fungibility


def read_admission_checks(
    reader: Reader, path: str, spec: Mapping[str, Any]
) -> dict[str, tuple[str, ...]]:
    checks: dict[str, tuple[str, ...]] = {}
    for i, name in enumerate(reader.items(f"{path}.admissionChecks", spec.get("admissionChecks"))):
        checks[reader.name(f"{path}.admissionChecks[{i}]", name)] = ()
    strategy = reader.mapping(
        f"{path}.admissionChecksStrategy", spec.get("admissionChecksStrategy"), ("admissionChecks",)
    )
    for i, rule in enumerate(
        reader.items(
            f"{path}.admissionChecksStrategy.admissionChecks", strategy.get("admissionChecks")
        )
    ):
        rule_path = f"{path}.admissionChecksStrategy.admissionChecks[{i}]"
        rule = reader.mapping(rule_path, rule, ("name", "onFlavors"))
        name = reader.name(f"{rule_path}.name", rule.get("name"))
        checks[name] = tuple(
            str(f) for f in reader.items(f"{rule_path}.onFlavors", rule.get("onFlavors"))
        )
    return checks


def read_priority_classes(reader: Reader, raw: Any) -> dict[str, int]:
    classes: dict[str, int] = {}
    for i, entry in enumerate(reader.items("workloadPriorityClasses", raw)):
        path = f"workloadPriorityClasses[{i}]"
        name, spec = unwrap(reader, path, entry)
        name = reader.name(f"{path}.name", name)
        spec = reader.mapping(path, spec, ("value", "description"))
        value = spec.get("value")
        errors = policy_rules.priority_value_errors(f"{path}.value", value)
        reader.errors.extend(errors)
        if not errors and isinstance(value, int):
            classes[name] = value
    return classes


def check_references(reader: Reader, policy: Policy) -> None:
    """Flavors, cohorts and queues named must exist; cohorts form a tree."""
    for i, queue in enumerate(policy.cluster_queues.values()):
        if queue.cohort is not None and queue.cohort not in policy.cohorts:
            # Kueue creates an implicit cohort for a name no Cohort object defines.
            pass
        for g, group in enumerate(queue.resource_groups):
            for f, fq in enumerate(group.flavors):
                if fq.flavor not in policy.flavors:
                    reader.error(
                        f"clusterQueues[{i}].resourceGroups[{g}].flavors[{f}].name",
                        "unknown-flavor",
                        f"no resource flavor named {fq.flavor!r}",
                    )
    for i, cohort in enumerate(policy.cohorts.values()):
        for g, group in enumerate(cohort.resource_groups):
            for f, fq in enumerate(group.flavors):
                if fq.flavor not in policy.flavors:
                    reader.error(
                        f"cohorts[{i}].resourceGroups[{g}].flavors[{f}].name",
                        "unknown-flavor",
                        f"no resource flavor named {fq.flavor!r}",
                    )
        seen = [cohort.name]
        parent = cohort.parent
        while parent is not None:
            if parent in seen:
                loop = " → ".join([*seen, parent])
                reader.error(
                    f"cohorts[{i}].parentName",
                    "cohort-cycle",
                    f"makes a cycle: {loop}; cohorts must form a tree",
                )
                break
            seen.append(parent)
            parent = policy.cohorts[parent].parent if parent in policy.cohorts else None


def implicit_cohorts(
    policy_cohorts: dict[str, Cohort], queues: dict[str, ClusterQueue]
) -> dict[str, Cohort]:
    """Kueue treats a cohort that is only named (by a queue or as a parent) as an
    empty root cohort; make those explicit."""
    cohorts = dict(policy_cohorts)
    named = {q.cohort for q in queues.values() if q.cohort} | {
        c.parent for c in policy_cohorts.values() if c.parent
    }
    for name in sorted(named - cohorts.keys()):
        cohorts[name] = Cohort(name=name)
    return cohorts
