"""What an apply would change: desired objects against what the cluster has.

Level-based: for each desired object, create it if missing, update it if
Berth's hash label differs or the fields Berth sets no longer hold their values
(someone edited it by hand: drift), else leave it; for each object Berth
manages that is no longer desired, delete it — but a ClusterQueue or LocalQueue
still holding workloads is first set to ``stopPolicy: HoldAndDrain`` and only
deleted once empty, and Namespaces are never deleted (that would delete every
job in them), nor is Kueue's manager ConfigMap. Objects without Berth's label
are never touched. An update of a field Kueue makes immutable (a Topology's
levels) is marked ``recreate``: the object is deleted and created again. If
nothing at all is desired, nothing is pruned: an empty policy is far likelier
a wiped database than a wish to empty the cluster.

Some objects are a person's to apply on some clusters (Kueue's manager
ConfigMap on a real one, see ``queues.kueue.manager_config``): the caller
names their kinds in ``manual``, and the plan shows them as ``manual`` changes
with instructions instead of creating or updating them.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from queues.kueue.render import MANAGED_BY, MANAGER, POLICY_HASH, TEAM_LABEL, identity

Identity = tuple[str, str, str]

CREATE, UPDATE, UNCHANGED, DELETE, DRAIN, KEEP, CONFLICT, MANUAL = (
    "create",
    "update",
    "unchanged",
    "delete",
    "drain",
    "keep",
    "conflict",
    "manual",
)
DRAINABLE = {"ClusterQueue", "LocalQueue"}
# Kind -> why Berth keeps it when the policy no longer asks for it.
NEVER_DELETED = {
    "Namespace": "namespaces are never deleted by Berth",
    # Deleting it would leave Kueue unable to start.
    "ConfigMap": "Kueue's manager configuration is never deleted by Berth",
}
# Kinds that configure Kueue rather than describe the policy: they alone do not
# make a policy "not empty" (a wiped database keeps no such row either).
CONFIGURATION_KINDS = {"ConfigMap"}
# Kind -> fields Kueue's CRD makes immutable (CEL ``self == oldSelf``): the API
# server refuses an update that changes one, so such a change deletes the
# object and creates it again. Berth itself refuses to edit these fields; they
# differ only when an object was deleted and made again under the same name
# before a reconcile ran, or after a hand edit on a cluster without the CRD's rules.
IMMUTABLE = {"Topology": ("spec.levels",)}
# Fields server-side apply owns whole (atomic maps and lists in Kueue's CRDs): a
# change anywhere in one changes the whole field's value.
ATOMIC = (
    "spec.namespaceSelector",
    "spec.resourceGroups",
    "spec.nodeLabels",
    "spec.nodeTaints",
    "spec.tolerations",
    "spec.levels",
)


@dataclass
class Change:
    action: str
    kind: str
    namespace: str
    name: str
    desired: dict[str, Any] | None = None
    actual: dict[str, Any] | None = None
    fields: list[str] = field(default_factory=list)  # paths that differ
    drift: bool = False  # the cluster's copy was edited behind Berth's back
    note: str = ""
    # Server-side apply takes fields over from other managers only on objects
    # Berth owns; on someone else's namespace it adds its label, or fails.
    force: bool = True
    # An update of an immutable field (``IMMUTABLE``): delete, then create.
    recreate: bool = False
    # An object Berth takes over (imported): the fields whose value changes,
    # which Berth takes from their previous manager (the rest it co-owns).
    taken: list[str] = field(default_factory=list)

    @property
    def identity(self) -> Identity:
        return self.kind, self.namespace, self.name

    def as_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "kind": self.kind,
            "namespace": self.namespace or None,
            "name": self.name,
            "fields": self.fields,
            "drift": self.drift,
            "note": self.note or None,
            **({"taken_over": self.taken} if self.taken else {}),
        }


@dataclass
class Plan:
    changes: list[Change]
    prune_refused: bool = False

    def by_action(self, action: str) -> list[Change]:
        return [c for c in self.changes if c.action == action]

    @property
    def writes(self) -> list[Change]:
        return [c for c in self.changes if c.action in (CREATE, UPDATE, DELETE, DRAIN)]

    def summary(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for change in self.changes:
            counts[change.action] = counts.get(change.action, 0) + 1
        return counts


def is_managed(obj: Mapping[str, Any]) -> bool:
    return obj.get("metadata", {}).get("labels", {}).get(MANAGED_BY) == MANAGER


def differences(
    desired: Any, actual: Any, path: str = "", *, changed_only: bool = False
) -> list[str]:
    """Paths where ``actual`` does not hold what ``desired`` sets. Fields the
    server adds (defaults, status, bookkeeping) are not differences.
    ``changed_only``: only where ``actual`` holds another value, not where it
    holds none."""
    if changed_only and actual is None:
        return []
    if isinstance(desired, Mapping):
        if not isinstance(actual, Mapping):
            return [path or "."]
        found: list[str] = []
        for key, value in desired.items():
            where = f"{path}.{key}" if path else key
            found += differences(value, actual.get(key), where, changed_only=changed_only)
        return found
    if isinstance(desired, list):
        if not isinstance(actual, list) or len(actual) != len(desired):
            return [path]
        found = []
        for index, (want, have) in enumerate(zip(desired, actual, strict=True)):
            found += differences(want, have, f"{path}[{index}]", changed_only=changed_only)
        return found
    return [] if _same_scalar(desired, actual) else [path]


def _same_scalar(desired: Any, actual: Any) -> bool:
    if desired == actual:
        return True
    # The API server may return a quantity or weight as a number where Berth sent
    # a string ("8" vs 8).
    return isinstance(desired, str) and isinstance(actual, int | float) and desired == str(actual)


def _compared(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of an object Berth owns."""
    metadata = obj.get("metadata", {})
    part: dict[str, Any] = {"metadata": {"labels": metadata.get("labels", {})}}
    if metadata.get("annotations"):
        part["metadata"]["annotations"] = metadata["annotations"]
    for key in ("spec", "value", "data"):
        if key in obj:
            part[key] = obj[key]
    return part


def satisfies(desired: Mapping[str, Any], actual: Mapping[str, Any]) -> bool:
    """The cluster's copy holds every field and label Berth sets, as Berth sets it."""
    return not differences(_compared(desired), actual)


def holds_workloads(obj: Mapping[str, Any]) -> bool:
    """Whether a queue still has workloads, from the status Kueue keeps."""
    status = obj.get("status") or {}
    return any(
        status.get(k) for k in ("admittedWorkloads", "reservingWorkloads", "pendingWorkloads")
    )


def _adopt_namespace(desired: Mapping[str, Any], current: dict[str, Any]) -> Change:
    """A team namespace that exists already (created by a cluster admin or
    another tool) keeps its owner: Berth only adds its team label, which the
    ClusterQueue's namespaceSelector matches, never its ownership labels."""
    name = desired["metadata"]["name"]
    team = desired["metadata"]["labels"][TEAM_LABEL]
    has = current.get("metadata", {}).get("labels", {}).get(TEAM_LABEL)
    body = {
        "apiVersion": desired["apiVersion"],
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {TEAM_LABEL: team}},
    }
    note = "not Berth's namespace: only its team label is Berth's"
    if has == team:
        return Change(UNCHANGED, "Namespace", "", name, desired=body, actual=current, note=note)
    return Change(
        UPDATE,
        "Namespace",
        "",
        name,
        desired=body,
        actual=current,
        fields=[f"metadata.labels.{TEAM_LABEL}"],
        drift=has is not None,
        note=note,
        force=False,
    )


def _holds(obj: Mapping[str, Any], field_path: str) -> bool:
    """Whether ``obj`` has a value at ``field_path`` (plain keys, as ``ATOMIC``'s)."""
    node: Any = obj
    for key in field_path.split("."):
        node = node.get(key) if isinstance(node, Mapping) else None
    return node is not None


def _whole(paths: list[str]) -> list[str]:
    """``paths`` with each one inside an atomic field (``ATOMIC``) made that field."""
    out: list[str] = []
    for path in paths:
        whole = next((a for a in ATOMIC if path == a or path.startswith((f"{a}.", f"{a}["))), path)
        if whole not in out:
            out.append(whole)
    return out


def _in_their_notation(desired: Any, actual: Any) -> Any:
    """``desired`` with each value the cluster holds in another notation ("8"
    where it has 8) written as the cluster has it: server-side apply compares
    values exactly, so Berth then co-owns the field instead of conflicting."""
    if isinstance(desired, Mapping):
        if not isinstance(actual, Mapping):
            return desired
        return {key: _in_their_notation(value, actual.get(key)) for key, value in desired.items()}
    if isinstance(desired, list):
        if not isinstance(actual, list) or len(actual) != len(desired):
            return desired
        return [_in_their_notation(want, have) for want, have in zip(desired, actual, strict=True)]
    return actual if desired != actual and _same_scalar(desired, actual) else desired


def _take_over(key: Identity, desired: dict[str, Any], current: dict[str, Any]) -> Change:
    """An object an import took into the policy. Server-side apply without
    force where Berth sets what is there already (in the cluster's notation):
    Berth then shares those fields with their manager, and adds its labels
    (and what the object left out), which nobody owns. Only where Berth
    changes a value does it take the field over (force); those fields are
    ``taken``. Reconcile afterwards finds the object as it renders it."""
    kind, namespace, name = key
    body = _in_their_notation(desired, current)
    fields = _whole(differences(_compared(body), current))
    changed = _whole(differences(_compared(body), current, changed_only=True))
    # An atomic field the cluster holds changes value whatever part of it differs.
    taken = [f for f in fields if f in changed or (f in ATOMIC and _holds(current, f))]
    return Change(
        UPDATE,
        kind,
        namespace,
        name,
        desired=body,
        actual=current,
        fields=fields,
        note="taken over by Berth (imported)",
        force=bool(taken),
        taken=taken,
    )


def _immutable(kind: str, fields: list[str]) -> list[str]:
    """The immutable fields of ``kind`` among the differing ``fields``."""
    frozen = IMMUTABLE.get(kind, ())
    return [
        path
        for path in frozen
        if any(f == path or f.startswith((f"{path}.", f"{path}[")) for f in fields)
    ]


def _manual(obj: dict[str, Any], current: dict[str, Any] | None, note: str) -> Change:
    """An object someone applies by hand: unchanged when ``current`` (if Berth
    could read it) already holds it, else a manual step saying what to do."""
    kind, namespace, name = identity(obj)
    if current is not None and is_managed(current) and satisfies(obj, current):
        return Change(UNCHANGED, kind, namespace, name, desired=obj, actual=current)
    fields = differences(_compared(obj), current) if current is not None else []
    return Change(
        MANUAL, kind, namespace, name, desired=obj, actual=current, fields=fields, note=note
    )


def make_plan(
    desired: Iterable[Mapping[str, Any]],
    actual: Iterable[Mapping[str, Any]],
    *,
    manual: Mapping[str, str] | None = None,
    adopt: Collection[Identity] = (),
) -> Plan:
    """``actual``: every object of the kinds Berth renders, managed or not.
    ``manual``: kind -> instructions, for the kinds Berth must not write here.
    ``adopt``: objects not Berth's that an import took into the policy: Berth
    takes them over instead of refusing them as conflicts."""
    manual = manual or {}
    adopted = set(adopt)
    wanted = {identity(obj): dict(obj) for obj in desired}
    present = {identity(obj): dict(obj) for obj in actual}
    changes = [
        _wanted_change(key, obj, present.get(key), manual, key in adopted)
        for key, obj in wanted.items()
    ]
    leftovers = [
        (key, obj) for key, obj in present.items() if key not in wanted and is_managed(obj)
    ]
    refuse = not any(kind not in CONFIGURATION_KINDS for kind, _, _ in wanted) and bool(leftovers)
    for key, obj in sorted(leftovers):
        changes.append(_leftover_change(key, obj, refuse))
    return Plan(changes, prune_refused=refuse)


def _wanted_change(
    key: Identity,
    obj: dict[str, Any],
    current: dict[str, Any] | None,
    manual: Mapping[str, str],
    adopted: bool,
) -> Change:
    """What to do about a desired object, given what the cluster has under its name."""
    kind, namespace, name = key
    if kind in manual:
        return _manual(obj, current, manual[kind])
    if current is None:
        return Change(CREATE, kind, namespace, name, desired=obj)
    if not is_managed(current) and kind == "Namespace":
        return _adopt_namespace(obj, current)
    if not is_managed(current) and adopted:
        return _take_over(key, obj, current)
    if not is_managed(current):
        return Change(
            CONFLICT,
            kind,
            namespace,
            name,
            desired=obj,
            actual=current,
            note="exists and is not managed by Berth; label it "
            f"{MANAGED_BY}={MANAGER} to let Berth take it over",
        )
    fields = differences(_compared(obj), current)
    hash_changed = (
        current["metadata"].get("labels", {}).get(POLICY_HASH)
        != obj["metadata"]["labels"][POLICY_HASH]
    )
    if not fields and not hash_changed:
        return Change(UNCHANGED, kind, namespace, name, desired=obj, actual=current)
    frozen = _immutable(kind, fields)
    return Change(
        UPDATE,
        kind,
        namespace,
        name,
        desired=obj,
        actual=current,
        fields=fields,
        drift=bool(fields) and not hash_changed,
        recreate=bool(frozen),
        note=(
            f"Kueue does not allow {', '.join(frozen)} to change: deleted and created again"
            if frozen
            else ""
        ),
    )


def _leftover_change(key: Identity, obj: dict[str, Any], refuse: bool) -> Change:
    """What to do about an object Berth manages that is no longer desired;
    ``refuse``: nothing is pruned (the policy is empty)."""
    kind, namespace, name = key
    if refuse:
        return Change(
            KEEP, kind, namespace, name, actual=obj, note="not pruned: the policy is empty"
        )
    if kind in NEVER_DELETED:
        return Change(KEEP, kind, namespace, name, actual=obj, note=NEVER_DELETED[kind])
    if kind in DRAINABLE and holds_workloads(obj):
        already = (obj.get("spec") or {}).get("stopPolicy") == "HoldAndDrain"
        return Change(
            KEEP if already else DRAIN,
            kind,
            namespace,
            name,
            actual=obj,
            note="draining: deleted once its workloads are gone",
        )
    return Change(DELETE, kind, namespace, name, actual=obj)
