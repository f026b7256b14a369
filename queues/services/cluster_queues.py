"""Writes for ClusterQueues and their quotas."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queues import rules, snapshots
from queues.choices import (
    AdmissionMode,
    BorrowWithinCohortPolicy,
    FungibilityAction,
    FungibilityPreference,
    PolicyKind,
    QueueingStrategy,
    ReclaimWithinCohort,
    StopPolicy,
    WithinClusterQueue,
)
from queues.errors import FieldError, PolicyConflict
from queues.models import ClusterQueue, Cohort, QueueClass, Team, WorkloadPriorityClass
from queues.services.classes import preemption_choice_errors
from queues.services.common import (
    choice_errors,
    in_use,
    object_name_errors,
    resolve,
)
from queues.services.kinds import PolicyKindService, save_fields
from queues.services.local_queues import remove_generated_local_queues, sync_generated_local_queues
from queues.services.quotas import ParsedQuota, parse_quota_fields, replace_quotas

REFERENCES = ("team", "cohort", "queue_class", "default_priority_class")

# The fields a queue class supplies when the queue leaves them empty.
CLASS_CONTROLLED = {
    "queueing_strategy": QueueingStrategy.BEST_EFFORT_FIFO.value,
    "within_cluster_queue": WithinClusterQueue.NEVER.value,
    "reclaim_within_cohort": ReclaimWithinCohort.NEVER.value,
    "borrow_within_cohort_policy": BorrowWithinCohortPolicy.NEVER.value,
}

DEFAULTS: dict[str, Any] = {
    "name": None,
    "description": "",
    "team": None,
    "cohort": None,
    "queue_class": None,
    "default_priority_class": None,
    **dict.fromkeys(CLASS_CONTROLLED),
    "borrow_within_cohort_max_priority_threshold": None,
    "fair_sharing_weight": "1",
    "when_can_borrow": FungibilityAction.MAY_STOP_SEARCH.value,
    "when_can_preempt": FungibilityAction.TRY_NEXT_FLAVOR.value,
    "flavor_fungibility_preference": FungibilityPreference.NONE.value,
    "stop_policy": StopPolicy.NONE.value,
    "admission_mode": AdmissionMode.NONE.value,
    "resource_groups": [],
}


def _complete(
    spec: dict[str, Any], changes: Mapping[str, Any], existing: ClusterQueue | None
) -> dict[str, Any]:
    """Fill the queueing and preemption fields from the queue class.

    An empty field takes the class's value. When the queue moves to another
    class, a field that still has the old class's value follows the new class,
    unless the same request sets it: the queue kept the old default, so it
    wants the new one."""
    queue_class = _class(spec["queue_class"])
    old_class = existing.queue_class if existing is not None else None
    class_changed = existing is not None and old_class != queue_class
    for field, fallback in CLASS_CONTROLLED.items():
        new_default = getattr(queue_class, field) if queue_class else fallback
        old_default = getattr(old_class, field) if old_class else fallback
        if spec.get(field) in (None, "") or (
            class_changed and field not in changes and spec[field] == old_default
        ):
            spec[field] = new_default
    return spec


def _class(name: str | None) -> QueueClass | None:
    return QueueClass.objects.filter(name=name).first() if name else None


def _parse(spec: dict[str, Any]) -> ParsedQuota:
    return parse_quota_fields(spec, parent_field="cohort", owner="cluster queue")


def _validate(spec: dict[str, Any], existing: ClusterQueue | None) -> list[FieldError]:
    # A label, not a subdomain: Berth names the LocalQueues it generates after the
    # queue, and jobs carry that name in a label value (at most 63 characters).
    errors = object_name_errors(spec, existing, "queue", kind="label")
    if spec.get("name") in (None, ""):  # nothing more to check without it
        return errors
    if existing is None and ClusterQueue.objects.filter(name=spec["name"]).exists():
        errors.append(
            FieldError("name", "unique", f"a cluster queue named {spec['name']!r} exists")
        )
    team = resolve(Team, "team", spec["team"], errors, lookup="slug")
    if existing is not None and team is not None:
        stranded = sorted(
            str(lq)
            for lq in existing.local_queues.filter(generated=False).exclude(namespace__team=team)
        )
        if stranded:
            errors.append(
                FieldError(
                    "team",
                    "namespace-not-admitted",
                    f"local queue(s) {', '.join(stranded)} point at this queue from "
                    f"namespaces team {team.slug!r} does not own; repoint them first",
                )
            )
    resolve(Cohort, "cohort", spec["cohort"], errors)
    resolve(QueueClass, "queue_class", spec["queue_class"], errors)
    resolve(WorkloadPriorityClass, "default_priority_class", spec["default_priority_class"], errors)
    errors += preemption_choice_errors(spec)
    errors += choice_errors("when_can_borrow", spec["when_can_borrow"], FungibilityAction)
    errors += choice_errors("when_can_preempt", spec["when_can_preempt"], FungibilityAction)
    errors += choice_errors(
        "flavor_fungibility_preference",
        spec["flavor_fungibility_preference"],
        FungibilityPreference,
    )
    errors += choice_errors("stop_policy", spec["stop_policy"], StopPolicy)
    # Kueue takes UsageBasedAdmissionFairSharing even while admission fair sharing
    # is off in its configuration (the queue then orders as without it), so
    # Berth does not tie the two together either.
    errors += choice_errors("admission_mode", spec["admission_mode"], AdmissionMode)
    errors += rules.preemption_errors(
        reclaim_within_cohort=spec["reclaim_within_cohort"],
        borrow_within_cohort_policy=spec["borrow_within_cohort_policy"],
        max_priority_threshold=spec["borrow_within_cohort_max_priority_threshold"],
    )
    errors += rules.fungibility_errors(
        when_can_borrow=spec["when_can_borrow"],
        when_can_preempt=spec["when_can_preempt"],
        preference=spec["flavor_fungibility_preference"],
    )
    return errors + _parse(spec).errors


def _write(spec: dict[str, Any], existing: ClusterQueue | None, actor: Any) -> ClusterQueue:
    parsed = _parse(spec)
    fields = {key: value for key, value in spec.items() if key != "resource_groups"}
    fields["team"] = Team.objects.get(slug=spec["team"]) if spec["team"] else None
    fields["cohort"] = Cohort.objects.get(name=spec["cohort"]) if spec["cohort"] else None
    fields["queue_class"] = (
        QueueClass.objects.get(name=spec["queue_class"]) if spec["queue_class"] else None
    )
    fields["default_priority_class"] = (
        WorkloadPriorityClass.objects.get(name=spec["default_priority_class"])
        if spec["default_priority_class"]
        else None
    )
    fields["fair_sharing_weight"] = parsed.weight
    queue = save_fields(existing or ClusterQueue(), fields, list(fields), is_new=existing is None)
    replace_quotas(queue, parsed.groups)
    return queue


def _delete_blocker(queue: ClusterQueue) -> PolicyConflict | None:
    # Generated LocalQueues go with the queue; an admin's own ones must be moved.
    return in_use(
        f"cluster queue {queue.name!r}",
        {"local_queues": (str(lq) for lq in queue.local_queues.filter(generated=False))},
        "delete or repoint those local queues first",
    )


cluster_queues: PolicyKindService[ClusterQueue] = PolicyKindService(
    kind=PolicyKind.CLUSTER_QUEUE,
    defaults=DEFAULTS,
    snapshot=snapshots.cluster_queue,
    validate=_validate,
    write=_write,
    delete_blocker=_delete_blocker,
    object_name=lambda queue: queue.name,
    complete=_complete,
    references=REFERENCES,
    after_change=sync_generated_local_queues,
    before_delete=lambda queue, actor: remove_generated_local_queues(
        actor, queue.local_queues.filter(generated=True)
    ),
)
