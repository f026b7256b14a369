"""What a policy edit would do to the cluster, before it is applied.

``dry_run`` makes the edit for real, through the same service as Apply, inside
a transaction that is always rolled back: the rules, the defaults a queue class
fills in and the LocalQueues Berth generates all behave exactly as they would
on Apply, and nothing stays behind (no policy row, no history entry, no
reconcile: ``on_commit`` hooks of a rolled-back transaction never run). The
Kueue objects rendered before and after are compared object by object
(``queues.kueue.plan.make_plan``) and field by field (``leaf_changes``). What
the configured cluster takes by hand (Kueue's manager ConfigMap on a real
cluster) shows as a ``manual`` change with its instructions; a ConfigMap's YAML
is compared key by key, not as one long string.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from django.db import transaction

from queues.kueue.plan import CREATE, MANUAL, UNCHANGED, UPDATE, make_plan
from queues.kueue.render import POLICY_HASH, to_yaml_documents
from queues.reconcile import configured_manual_steps, desired_objects
from queues.services.common import policy_write


class _Absent:
    """A field one side does not have (not the same as a null value)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()
# Bookkeeping that changes with every edit; showing it would only add noise.
HASH_PATH = f"metadata.labels.{POLICY_HASH}"


def as_text(value: Any) -> str:
    """A value as an admin reads it: strings as they are, a list of strings (a
    topology's levels, a team's namespaces) as the strings in order, other
    structures as compact JSON."""
    if value is ABSENT or value is None:
        return "—"
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        return ", ".join(value)
    return json.dumps(value, sort_keys=True, separators=(", ", ": "))


@dataclass(frozen=True)
class FieldChange:
    path: str
    old: Any
    new: Any

    @property
    def old_text(self) -> str:
        return as_text(self.old)

    @property
    def new_text(self) -> str:
        return as_text(self.new)

    @property
    def added(self) -> bool:
        return self.old is ABSENT

    @property
    def removed(self) -> bool:
        return self.new is ABSENT


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def leaf_changes(old: Any, new: Any, path: str = "") -> list[FieldChange]:
    """Every place where ``old`` and ``new`` differ, as deep as both sides are
    objects or lists (``spec.resourceGroups[0].flavors[0].resources[0].nominalQuota``);
    a part only one side has is one change (old or new ``ABSENT``)."""
    if old is new or old == new:
        return []
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        keys = [*old, *(key for key in new if key not in old)]
        found: list[FieldChange] = []
        for key in keys:
            found += leaf_changes(old.get(key, ABSENT), new.get(key, ABSENT), _join(path, key))
        return found
    if isinstance(old, list) and isinstance(new, list):
        found = []
        for index in range(max(len(old), len(new))):
            found += leaf_changes(
                old[index] if index < len(old) else ABSENT,
                new[index] if index < len(new) else ABSENT,
                f"{path}[{index}]",
            )
        return found
    return [FieldChange(path or ".", old, new)]


@dataclass(frozen=True)
class ObjectChange:
    """One Kueue (or Namespace) object the edit would create, update or delete."""

    action: str  # queues.kueue.plan's words: create, update, delete (drain, keep)
    kind: str
    namespace: str
    name: str
    fields: tuple[FieldChange, ...] = ()
    manifest: str = ""  # YAML of a created object
    note: str = ""

    @property
    def label(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


@dataclass(frozen=True)
class PolicyPlan:
    changes: tuple[ObjectChange, ...]
    unchanged: int

    @property
    def empty(self) -> bool:
        return not self.changes

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for change in self.changes:
            counts[change.action] = counts.get(change.action, 0) + 1
        return counts


def _readable(obj: Mapping[str, Any] | None) -> Any:
    """``obj`` with each ConfigMap data value that is a YAML mapping parsed, so
    a change reads ``data.controller_manager_config.yaml.waitForPodsReady.timeout``."""
    if obj is None or not isinstance(obj.get("data"), Mapping):
        return obj
    data: dict[str, Any] = {}
    for key, text in obj["data"].items():
        try:
            parsed = yaml.safe_load(text) if isinstance(text, str) else None
        except yaml.YAMLError:
            parsed = None
        data[key] = parsed if isinstance(parsed, dict) else text
    return {**obj, "data": data}


def compare(
    before: Iterable[Mapping[str, Any]],
    after: Iterable[Mapping[str, Any]],
    manual: Mapping[str, str] | None = None,
) -> PolicyPlan:
    """The rendered policy before and after an edit, as the reconciler would see
    it if the cluster held exactly ``before``. ``manual``: kind -> instructions,
    for what the configured cluster takes by hand."""
    plan = make_plan(after, before, manual=manual)
    changes: list[ObjectChange] = []
    unchanged = 0
    for change in plan.changes:
        base = (change.kind, change.namespace, change.name)
        if change.action == UNCHANGED:
            unchanged += 1
        elif change.action == CREATE:
            manifest = to_yaml_documents([change.desired or {}])
            changes.append(ObjectChange(CREATE, *base, manifest=manifest, note=change.note))
        elif change.action == UPDATE or (change.action == MANUAL and change.actual is not None):
            fields = tuple(
                c
                for c in leaf_changes(_readable(change.actual), _readable(change.desired))
                if c.path != HASH_PATH
            )
            changes.append(ObjectChange(change.action, *base, fields=fields, note=change.note))
        elif change.action == MANUAL:
            manifest = to_yaml_documents([change.desired or {}])
            changes.append(ObjectChange(MANUAL, *base, manifest=manifest, note=change.note))
        else:
            changes.append(ObjectChange(change.action, *base, note=change.note))
    return PolicyPlan(tuple(changes), unchanged)


def dry_run(write: Callable[[], object]) -> PolicyPlan:
    """What ``write`` (a policy service call) would change in the Kueue objects,
    without keeping any of it. Its ``PolicyInvalid`` or ``PolicyConflict``
    propagates, after the rollback.

    The policy write lock is taken first, so "before" and "after" bracket
    exactly this write even while another admin applies a change."""
    with transaction.atomic():
        with policy_write():
            before = desired_objects()
            write()
            after = desired_objects()
        # Always undo: the write, its history entry and its on_commit reconcile.
        transaction.set_rollback(True)
    return compare(before, after, configured_manual_steps())
