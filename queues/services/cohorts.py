"""Writes for Cohorts, the lending tree."""

from __future__ import annotations

from typing import Any

from queues import snapshots
from queues.choices import PolicyKind
from queues.errors import FieldError, PolicyConflict
from queues.models import Cohort
from queues.services.common import (
    in_use,
    object_name_errors,
    resolve,
)
from queues.services.kinds import PolicyKindService, save_fields
from queues.services.quotas import ParsedQuota, parse_quota_fields, replace_quotas

DEFAULTS: dict[str, Any] = {
    "name": None,
    "description": "",
    "parent": None,
    "fair_sharing_weight": "1",
    "resource_groups": [],
}


def cycle_path(cohort: Cohort, new_parent: Cohort) -> list[str] | None:
    """The names around the loop if ``cohort`` took ``new_parent``, else None."""
    path = [cohort.name]
    node: Cohort | None = new_parent
    seen: set[int] = set()
    while node is not None and node.pk not in seen:
        path.append(node.name)
        if node.pk == cohort.pk:
            return path
        seen.add(node.pk)
        node = node.parent
    return None


def _parse(spec: dict[str, Any]) -> ParsedQuota:
    return parse_quota_fields(spec, parent_field="parent", owner="cohort")


def _validate(spec: dict[str, Any], existing: Cohort | None) -> list[FieldError]:
    errors = object_name_errors(spec, existing, "cohort")
    if spec.get("name") in (None, ""):  # nothing more to check without it
        return errors
    if existing is None and Cohort.objects.filter(name=spec["name"]).exists():
        errors.append(FieldError("name", "unique", f"a cohort named {spec['name']!r} exists"))
    if spec["parent"] is not None and spec["parent"] == spec["name"]:
        errors.append(
            FieldError("parent", "cohort-cycle", f"{spec['name']!r} cannot be its own parent")
        )
    else:
        parent = resolve(Cohort, "parent", spec["parent"], errors)
        if parent is not None and existing is not None:
            loop = cycle_path(existing, parent)
            if loop:
                errors.append(
                    FieldError(
                        "parent",
                        "cohort-cycle",
                        f"{spec['parent']!r} would make a cycle: {' → '.join(loop)}; "
                        "cohorts must form a tree",
                    )
                )
    return errors + _parse(spec).errors


def _write(spec: dict[str, Any], existing: Cohort | None, actor: Any) -> Cohort:
    parsed = _parse(spec)
    fields = {
        "name": spec["name"],
        "description": spec["description"],
        "parent": Cohort.objects.get(name=spec["parent"]) if spec["parent"] else None,
        "fair_sharing_weight": parsed.weight,
    }
    cohort = save_fields(existing or Cohort(), fields, list(fields), is_new=existing is None)
    replace_quotas(cohort, parsed.groups)
    return cohort


def _delete_blocker(cohort: Cohort) -> PolicyConflict | None:
    return in_use(
        f"cohort {cohort.name!r}",
        {
            "cohorts": cohort.children.values_list("name", flat=True),
            "cluster_queues": cohort.cluster_queues.values_list("name", flat=True),
        },
        "move them to another cohort first",
    )


cohorts: PolicyKindService[Cohort] = PolicyKindService(
    kind=PolicyKind.COHORT,
    defaults=DEFAULTS,
    snapshot=snapshots.cohort,
    validate=_validate,
    write=_write,
    delete_blocker=_delete_blocker,
    object_name=lambda cohort: cohort.name,
    references=("parent",),
)
