"""Writes for WorkloadPriorityClasses and queue classes."""

from __future__ import annotations

from typing import Any

from queues import rules, snapshots
from queues.choices import (
    BorrowWithinCohortPolicy,
    PolicyKind,
    QueueingStrategy,
    ReclaimWithinCohort,
    WithinClusterQueue,
)
from queues.errors import FieldError, PolicyConflict
from queues.models import QueueClass, WorkloadPriorityClass
from queues.services.common import choice_errors, immutable_errors, in_use, required_errors, resolve
from queues.services.kinds import PolicyKindService, save_fields

NAME_IS_FIXED = "Kubernetes object names are fixed; create a new one instead"

PRIORITY_DEFAULTS: dict[str, Any] = {"name": None, "value": None, "description": ""}


def _validate_priority(
    spec: dict[str, Any], existing: WorkloadPriorityClass | None
) -> list[FieldError]:
    errors = required_errors(spec, ["name"])
    if spec.get("value") is None:
        errors.append(FieldError("value", "required", "is required"))
    if errors:
        return errors
    errors += rules.name_errors("name", spec["name"])
    errors += rules.priority_value_errors("value", spec["value"])
    if existing is not None:
        errors += immutable_errors("name", existing.name, spec["name"], NAME_IS_FIXED)
    elif WorkloadPriorityClass.objects.filter(name=spec["name"]).exists():
        errors.append(
            FieldError("name", "unique", f"a priority class named {spec['name']!r} exists")
        )
    return errors


def _priority_blocker(priority: WorkloadPriorityClass) -> PolicyConflict | None:
    return in_use(
        f"priority class {priority.name!r}",
        {
            "queue_classes": priority.queue_classes.values_list("name", flat=True),
            "cluster_queues": priority.cluster_queues.values_list("name", flat=True),
        },
        "pick another default priority there first",
    )


priority_classes: PolicyKindService[WorkloadPriorityClass] = PolicyKindService(
    kind=PolicyKind.PRIORITY_CLASS,
    defaults=PRIORITY_DEFAULTS,
    snapshot=snapshots.priority_class,
    validate=_validate_priority,
    write=lambda spec, existing, actor: save_fields(
        existing or WorkloadPriorityClass(),
        spec,
        list(PRIORITY_DEFAULTS),
        is_new=existing is None,
    ),
    delete_blocker=_priority_blocker,
    object_name=lambda priority: priority.name,
)


# What a queue class is written with when a field is left out: the model's
# own defaults (a name is required; a reference defaults to none).
QUEUE_CLASS_DEFAULTS: dict[str, Any] = {
    f.name: None if f.name == "name" or f.is_relation else f.get_default()
    for f in QueueClass.policy_fields()
}


def preemption_choice_errors(spec: dict[str, Any]) -> list[FieldError]:
    """The queueing and preemption fields a queue class and a ClusterQueue share."""
    errors = choice_errors("queueing_strategy", spec["queueing_strategy"], QueueingStrategy)
    errors += choice_errors(
        "within_cluster_queue", spec["within_cluster_queue"], WithinClusterQueue
    )
    errors += choice_errors(
        "reclaim_within_cohort", spec["reclaim_within_cohort"], ReclaimWithinCohort
    )
    errors += choice_errors(
        "borrow_within_cohort_policy",
        spec["borrow_within_cohort_policy"],
        BorrowWithinCohortPolicy,
    )
    return errors


def _validate_queue_class(spec: dict[str, Any], existing: QueueClass | None) -> list[FieldError]:
    errors = required_errors(spec, ["name"])
    if errors:
        return errors
    errors += rules.name_errors("name", spec["name"], kind="label")
    if existing is not None:
        errors += immutable_errors("name", existing.name, spec["name"], NAME_IS_FIXED)
    elif QueueClass.objects.filter(name=spec["name"]).exists():
        errors.append(FieldError("name", "unique", f"a queue class named {spec['name']!r} exists"))
    errors += preemption_choice_errors(spec)
    errors += rules.preemption_errors(
        reclaim_within_cohort=spec["reclaim_within_cohort"],
        borrow_within_cohort_policy=spec["borrow_within_cohort_policy"],
        max_priority_threshold=None,
    )
    resolve(WorkloadPriorityClass, "default_priority_class", spec["default_priority_class"], errors)
    for field, low, high in (("max_runtime_seconds", 60, 366 * 24 * 3600), ("max_retries", 0, 100)):
        value = spec[field]
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            errors.append(
                FieldError(field, "range", f"must be a whole number from {low} to {high}, or empty")
            )
    return errors


def _write_queue_class(spec: dict[str, Any], existing: QueueClass | None, actor: Any) -> QueueClass:
    fields = dict(spec)
    fields["default_priority_class"] = (
        WorkloadPriorityClass.objects.get(name=spec["default_priority_class"])
        if spec["default_priority_class"]
        else None
    )
    return save_fields(
        existing or QueueClass(), fields, list(QUEUE_CLASS_DEFAULTS), is_new=existing is None
    )


def _queue_class_blocker(queue_class: QueueClass) -> PolicyConflict | None:
    return in_use(
        f"queue class {queue_class.name!r}",
        {"cluster_queues": queue_class.cluster_queues.values_list("name", flat=True)},
        "move them to another class first",
    )


queue_classes: PolicyKindService[QueueClass] = PolicyKindService(
    kind=PolicyKind.QUEUE_CLASS,
    defaults=QUEUE_CLASS_DEFAULTS,
    snapshot=snapshots.queue_class,
    validate=_validate_queue_class,
    write=_write_queue_class,
    delete_blocker=_queue_class_blocker,
    object_name=lambda queue_class: queue_class.name,
    references=("default_priority_class",),
)
