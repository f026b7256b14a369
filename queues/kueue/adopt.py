"""Read a Kueue installation Berth did not make into Berth's policy.

Input: Kueue objects (and Namespaces) as plain dicts, read from a cluster or
from YAML files such as a GitOps repository. Output: the policy in the
services' input shape (``queues.snapshots``), plus everything Berth cannot
represent, named object by object and field by field, the objects it leaves
alone, and the queue class it guesses for each ClusterQueue with the reason.

Teams come from namespaces: each namespace holding a LocalQueue is a team of
its own name, or, with ``team_label``, the value of that namespace label names
the team (several namespaces may then share one). A ClusterQueue whose
LocalQueues all sit in one team's namespaces is that team's; any other is
shared.

What an API server adds to what it serves (defaults, field managers) is in
``queues.kueue.served``.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from queues.kueue.plan import Identity, is_managed
from queues.kueue.render import (
    APPROVAL_CHECK,
    APPROVAL_CONTROLLER,
    DESCRIPTION,
    KUEUE_GROUP,
    identity,
)
from queues.kueue.served import DEFAULTS

# Kind -> the spec fields Berth represents; any other is reported as dropped.
MODELLED_SPEC = {
    "Topology": {"levels"},
    "ResourceFlavor": {"nodeLabels", "nodeTaints", "tolerations", "topologyName"},
    "Cohort": {"parentName", "fairSharing", "resourceGroups"},
    "ClusterQueue": {
        "cohortName",
        "namespaceSelector",
        "queueingStrategy",
        "preemption",
        "fairSharing",
        "flavorFungibility",
        "stopPolicy",
        "resourceGroups",
        "admissionScope",
        "admissionChecksStrategy",
    },
    "LocalQueue": {"clusterQueue", "stopPolicy"},
}
KINDS = (
    "Namespace",
    "Topology",
    "ResourceFlavor",
    "WorkloadPriorityClass",
    "AdmissionCheck",
    "Cohort",
    "ClusterQueue",
    "LocalQueue",
)
# Name words -> queue class, first match wins: how the four classes are usually named.
CLASS_WORDS = (
    ("urgent-release", {"urgent", "release", "hotfix"}),
    ("interactive-dev", {"interactive", "dev", "notebook", "notebooks", "debug"}),
    ("eval-batch", {"eval", "evaluation", "batch", "inference"}),
    ("training-large", {"train", "training", "large", "pretrain", "pretraining"}),
)


@dataclass(frozen=True)
class Dropped:
    """A field Berth cannot represent: it stays on the cluster as it is, under
    the manager that set it, but Berth's policy, what-if and estimates do not
    know it."""

    kind: str
    name: str
    field: str
    value: Any
    why: str


@dataclass(frozen=True)
class Skipped:
    """An object Berth does not import: it is left on the cluster, never pruned."""

    kind: str
    name: str
    why: str


@dataclass(frozen=True)
class ClassGuess:
    queue: str
    queue_class: str | None
    why: str


@dataclass
class ImportedPolicy:
    """The policy read from a Kueue installation, in the services' input shape."""

    teams: list[dict[str, Any]] = field(default_factory=list)
    topologies: list[dict[str, Any]] = field(default_factory=list)
    flavors: list[dict[str, Any]] = field(default_factory=list)
    priority_classes: list[dict[str, Any]] = field(default_factory=list)
    cohorts: list[dict[str, Any]] = field(default_factory=list)
    cluster_queues: list[dict[str, Any]] = field(default_factory=list)
    local_queues: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    guesses: list[ClassGuess] = field(default_factory=list)
    # The cluster objects the policy stands for, which Berth takes over.
    adopted: list[Identity] = field(default_factory=list)
    # identity -> the object as read, for the plan's "before".
    sources: dict[Identity, dict[str, Any]] = field(default_factory=dict)


def label(identity_: Identity) -> str:
    kind, namespace, name = identity_
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _quantity(value: Any) -> str:
    return str(value)


def _resource_groups(groups: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for group in groups or []:
        flavors = []
        for flavor in group.get("flavors") or []:
            resources = []
            for quota in flavor.get("resources") or []:
                entry: dict[str, Any] = {
                    "name": quota["name"],
                    "nominal_quota": _quantity(quota.get("nominalQuota", 0)),
                }
                if quota.get("borrowingLimit") is not None:
                    entry["borrowing_limit"] = _quantity(quota["borrowingLimit"])
                if quota.get("lendingLimit") is not None:
                    entry["lending_limit"] = _quantity(quota["lendingLimit"])
                resources.append(entry)
            flavors.append({"name": flavor["name"], "resources": resources})
        out.append(
            {"covered_resources": list(group.get("coveredResources") or []), "flavors": flavors}
        )
    return out


def _weight(spec: Mapping[str, Any]) -> str:
    weight = (spec.get("fairSharing") or {}).get("weight", DEFAULTS["weight"])
    return str(weight)


def _tolerations(items: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for item in items or []:
        toleration = {
            "key": item.get("key", ""),
            "operator": item.get("operator", "Equal"),
            "value": item.get("value", ""),
            "effect": item.get("effect", ""),
            "toleration_seconds": item.get("tolerationSeconds"),
        }
        out.append(toleration)
    return out


def _taints(items: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"key": t.get("key", ""), "value": t.get("value", ""), "effect": t.get("effect", "")}
        for t in items or []
    ]


def _capacity_type(obj: Mapping[str, Any]) -> str:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if labels.get("berth.dev/capacity-type") in ("spot", "on-demand"):
        return str(labels["berth.dev/capacity-type"])
    words = [obj["metadata"]["name"], *((obj.get("spec") or {}).get("nodeLabels") or {}).values()]
    spot = any(re.search(r"spot|preemptible", str(word), re.IGNORECASE) for word in words)
    return "spot" if spot else "on-demand"


def guess_class(name: str, known: Iterable[str]) -> tuple[str | None, str]:
    """The queue class a ClusterQueue's name suggests, and why."""
    words = set(re.split(r"[-_.]", name.lower()))
    known = set(known)
    for queue_class, hints in CLASS_WORDS:
        hit = sorted(words & hints)
        if hit and queue_class in known:
            return queue_class, f"its name has {hit[0]!r}"
    return None, "its name suggests no queue class"


class _Reader:
    def __init__(
        self,
        objects: Iterable[Mapping[str, Any]],
        team_label: str | None,
        classes: Mapping[str, str],
        known_classes: Iterable[str],
        approval_classes: Iterable[str],
        skip: Iterable[str],
    ) -> None:
        self.result = ImportedPolicy()
        self.team_label = team_label
        self.classes = dict(classes)
        self.known = set(known_classes)
        self.approval = set(approval_classes)
        self.skip = set(skip)
        self.by_kind: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
        for obj in objects:
            self._sort(dict(obj))

    def _sort(self, obj: dict[str, Any]) -> None:
        kind = str(obj.get("kind", ""))
        api = str(obj.get("apiVersion", ""))
        if kind not in self.by_kind or (kind != "Namespace" and not api.startswith(KUEUE_GROUP)):
            name = (obj.get("metadata") or {}).get("name", "?")
            self.result.skipped.append(Skipped(kind or "?", name, "not a kind Berth imports"))
            return
        key = identity(obj)
        if kind != "Namespace" and is_managed(obj):
            self.result.skipped.append(Skipped(kind, key[2], "already Berth's (managed-by berth)"))
            return
        if f"{kind}/{key[2]}" in self.skip or (key[1] and f"{kind}/{key[1]}/{key[2]}" in self.skip):
            name = f"{key[1]}/{key[2]}" if key[1] else key[2]
            self.result.skipped.append(Skipped(kind, name, "left out (--skip)"))
            return
        self.by_kind[kind].append(obj)

    def _drop_unmodelled(self, obj: Mapping[str, Any]) -> None:
        kind, namespace, name = identity(obj)
        name = f"{namespace}/{name}" if namespace else name
        spec = obj.get("spec") or {}
        for key in sorted(set(spec) - MODELLED_SPEC.get(kind, set())):
            self.result.dropped.append(
                Dropped(kind, name, f"spec.{key}", spec[key], "Berth does not model this field")
            )

    def _adopt(self, obj: Mapping[str, Any]) -> None:
        key = identity(obj)
        self.result.adopted.append(key)
        self.result.sources[key] = dict(obj)

    # ------------------------------------------------------------------ kinds

    def read(self) -> ImportedPolicy:
        teams = self._teams()
        self._topologies()
        self._flavors()
        self._priority_classes()
        gate = self._admission_checks()
        self._cohorts()
        self._cluster_queues(teams, gate)
        self._local_queues()
        return self.result

    def _namespace_team(self) -> dict[str, str]:
        """Namespace -> team slug."""
        used = {
            (lq.get("metadata") or {}).get("namespace", "") for lq in self.by_kind["LocalQueue"]
        }
        labels = {
            ns["metadata"]["name"]: (ns["metadata"].get("labels") or {})
            for ns in self.by_kind["Namespace"]
        }
        if not self.team_label:
            return {ns: ns for ns in used if ns}
        teams = {
            name: str(found[self.team_label])
            for name, found in labels.items()
            if found.get(self.team_label)
        }
        for ns in sorted(used - set(teams)):
            self.result.skipped.append(
                Skipped(
                    "Namespace",
                    ns,
                    f"has no label {self.team_label} (or was not read): its LocalQueues are "
                    "not imported",
                )
            )
        return teams

    def _teams(self) -> dict[str, str]:
        by_namespace = self._namespace_team()
        slugs: dict[str, list[str]] = {}
        for namespace, slug in sorted(by_namespace.items()):
            slugs.setdefault(slug, []).append(namespace)
        for slug, namespaces in sorted(slugs.items()):
            self.result.teams.append(
                {
                    "slug": slug,
                    "name": slug,
                    "description": f"imported: namespaces {', '.join(namespaces)}",
                    "namespaces": namespaces,
                }
            )
        self.namespace_team = by_namespace
        return by_namespace

    def _topologies(self) -> None:
        for obj in self.by_kind["Topology"]:
            self._drop_unmodelled(obj)
            levels = [level.get("nodeLabel") for level in (obj.get("spec") or {}).get("levels", [])]
            self.result.topologies.append(
                {"name": obj["metadata"]["name"], "description": "", "levels": levels}
            )
            self._adopt(obj)

    def _flavors(self) -> None:
        for obj in self.by_kind["ResourceFlavor"]:
            self._drop_unmodelled(obj)
            spec = obj.get("spec") or {}
            self.result.flavors.append(
                {
                    "name": obj["metadata"]["name"],
                    "description": "",
                    "node_labels": dict(spec.get("nodeLabels") or {}),
                    "node_taints": _taints(spec.get("nodeTaints") or []),
                    "tolerations": _tolerations(spec.get("tolerations") or []),
                    "capacity_type": _capacity_type(obj),
                    "topology_name": spec.get("topologyName", "") or "",
                }
            )
            self._adopt(obj)

    def _priority_classes(self) -> None:
        for obj in self.by_kind["WorkloadPriorityClass"]:
            annotations = obj["metadata"].get("annotations") or {}
            description = obj.get("description") or annotations.get(DESCRIPTION, "")
            self.result.priority_classes.append(
                {
                    "name": obj["metadata"]["name"],
                    "value": obj.get("value", 0),
                    "description": description,
                }
            )
            self._adopt(obj)

    def _admission_checks(self) -> bool:
        """Whether Berth's approval check is among them (then adopted)."""
        found = False
        for obj in self.by_kind["AdmissionCheck"]:
            name = obj["metadata"]["name"]
            controller = (obj.get("spec") or {}).get("controllerName", "")
            if name == APPROVAL_CHECK and controller == APPROVAL_CONTROLLER:
                found = True
                self._adopt(obj)
                continue
            self.result.skipped.append(
                Skipped(
                    "AdmissionCheck",
                    name,
                    f"controller {controller or '(none)'}: Berth answers only its own approval "
                    "check; this one stays as it is, with its controller",
                )
            )
        return found

    def _cohorts(self) -> None:
        cohorts = {obj["metadata"]["name"]: obj for obj in self.by_kind["Cohort"]}
        # Parents first: a cohort names a parent Berth must already hold.
        placed: list[str] = []

        def place(name: str, trail: tuple[str, ...] = ()) -> None:
            if name in placed or name in trail or name not in cohorts:
                return
            parent = (cohorts[name].get("spec") or {}).get("parentName")
            if parent:
                place(parent, (*trail, name))
            placed.append(name)

        for name in sorted(cohorts):
            place(name)
        for name in placed:
            obj = cohorts[name]
            self._drop_unmodelled(obj)
            spec = obj.get("spec") or {}
            self.result.cohorts.append(
                {
                    "name": name,
                    "description": "",
                    "parent": spec.get("parentName") or None,
                    "fair_sharing_weight": _weight(spec),
                    "resource_groups": _resource_groups(spec.get("resourceGroups") or []),
                }
            )
            self._adopt(obj)
        named = {
            str((q.get("spec") or {}).get("cohortName"))
            for q in self.by_kind["ClusterQueue"]
            if (q.get("spec") or {}).get("cohortName")
        } | {str(c["parent"]) for c in self.result.cohorts if c["parent"]}
        for missing in sorted(named - set(cohorts)):
            # Kueue lets a name stand for a cohort with no object; Berth keeps one.
            self.result.cohorts.insert(
                0,
                {
                    "name": missing,
                    "description": "imported: named by a queue or cohort, no Cohort object",
                    "parent": None,
                    "fair_sharing_weight": DEFAULTS["weight"],
                    "resource_groups": [],
                },
            )

    def _queue_team(self, queue: str) -> str | None:
        teams = {
            self.namespace_team.get((lq.get("metadata") or {}).get("namespace", ""))
            for lq in self.by_kind["LocalQueue"]
            if (lq.get("spec") or {}).get("clusterQueue") == queue
        }
        return teams.pop() if len(teams) == 1 and None not in teams else None

    def _gates(self, obj: Mapping[str, Any], gate: bool) -> bool:
        """Whether the queue waits for Berth's approval; other checks are dropped."""
        name = obj["metadata"]["name"]
        strategy = (obj.get("spec") or {}).get("admissionChecksStrategy") or {}
        gated = False
        for index, check in enumerate(strategy.get("admissionChecks") or []):
            if check.get("name") == APPROVAL_CHECK and gate and not check.get("onFlavors"):
                gated = True
                continue
            self.result.dropped.append(
                Dropped(
                    "ClusterQueue",
                    name,
                    f"spec.admissionChecksStrategy.admissionChecks[{index}]",
                    dict(check),
                    "Berth gates a queue only with its own approval check, on every flavor",
                )
            )
        return gated

    def _class_of(self, name: str, gated: bool) -> str | None:
        if name in self.classes:
            chosen = self.classes[name] or None
            self.result.guesses.append(ClassGuess(name, chosen, "chosen (--class)"))
            return chosen
        guess, why = guess_class(name, self.known)
        if guess is not None and (guess in self.approval) != gated:
            wanted = "is gated by" if gated else "is not gated by"
            why = f"{why}, but the queue {wanted} Berth's approval check; not chosen"
            guess = None
        if guess is None and gated:
            approval = sorted(self.approval & self.known)
            if approval:
                guess, why = approval[0], "it is gated by Berth's approval check"
        self.result.guesses.append(ClassGuess(name, guess, why))
        return guess

    def _cluster_queues(self, teams: Mapping[str, str], gate: bool) -> None:
        for obj in self.by_kind["ClusterQueue"]:
            name = obj["metadata"]["name"]
            self._drop_unmodelled(obj)
            spec = obj.get("spec") or {}
            preemption = spec.get("preemption") or {}
            borrow = preemption.get("borrowWithinCohort") or {}
            fungibility = spec.get("flavorFungibility") or {}
            gated = self._gates(obj, gate)
            self.result.cluster_queues.append(
                {
                    "name": name,
                    "description": "",
                    "team": self._queue_team(name),
                    "cohort": spec.get("cohortName") or None,
                    "queue_class": self._class_of(name, gated),
                    "default_priority_class": None,
                    "queueing_strategy": spec.get("queueingStrategy", DEFAULTS["queueingStrategy"]),
                    "within_cluster_queue": preemption.get(
                        "withinClusterQueue", DEFAULTS["withinClusterQueue"]
                    ),
                    "reclaim_within_cohort": preemption.get(
                        "reclaimWithinCohort", DEFAULTS["reclaimWithinCohort"]
                    ),
                    "borrow_within_cohort_policy": borrow.get(
                        "policy", DEFAULTS["borrowWithinCohort"]
                    ),
                    "borrow_within_cohort_max_priority_threshold": borrow.get(
                        "maxPriorityThreshold"
                    ),
                    "fair_sharing_weight": _weight(spec),
                    "when_can_borrow": fungibility.get("whenCanBorrow", DEFAULTS["whenCanBorrow"]),
                    "when_can_preempt": fungibility.get(
                        "whenCanPreempt", DEFAULTS["whenCanPreempt"]
                    ),
                    "flavor_fungibility_preference": fungibility.get("preference", ""),
                    "stop_policy": spec.get("stopPolicy", DEFAULTS["stopPolicy"]),
                    "admission_mode": (spec.get("admissionScope") or {}).get("admissionMode", ""),
                    "resource_groups": _resource_groups(spec.get("resourceGroups") or []),
                }
            )
            self._adopt(obj)

    def _local_queues(self) -> None:
        for obj in self.by_kind["LocalQueue"]:
            namespace = obj["metadata"].get("namespace", "")
            if namespace not in self.namespace_team:
                continue  # said under its namespace
            spec = obj.get("spec") or {}
            self._drop_unmodelled(obj)
            self.result.local_queues.append(
                {
                    "namespace": namespace,
                    "name": obj["metadata"]["name"],
                    "cluster_queue": spec.get("clusterQueue"),
                    "stop_policy": spec.get("stopPolicy", DEFAULTS["stopPolicy"]),
                }
            )
            self._adopt(obj)


def read_kueue(
    objects: Iterable[Mapping[str, Any]],
    *,
    team_label: str | None = None,
    classes: Mapping[str, str] | None = None,
    known_classes: Iterable[str] = (),
    approval_classes: Iterable[str] = (),
    skip: Iterable[str] = (),
) -> ImportedPolicy:
    """The policy ``objects`` stand for. ``classes``: queue -> class chosen by
    a person (``""`` for none), over the guess; ``known_classes``: the queue
    classes Berth has, ``approval_classes`` those that require approval;
    ``skip``: ``Kind/name`` or ``Kind/namespace/name`` to leave out."""
    return _Reader(objects, team_label, classes or {}, known_classes, approval_classes, skip).read()
