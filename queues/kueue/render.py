"""Render the policy into Kueue objects (and the team Namespaces).

Input is a ``PolicyBundle``: the policy as plain dicts in the API's snapshot
shape (``queues.snapshots``). Output is a list of Kubernetes objects as plain
dicts, in a fixed order, every one labelled ``app.kubernetes.io/managed-by:
berth`` and ``berth.dev/policy-hash`` (a hash of what Berth sets on it), so the
reconciler can tell Berth's objects apart, skip unchanged ones and spot hand
edits. Rendering the same bundle twice gives identical output.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from queues.kueue import manager_config

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
KUEUE_API = f"{KUEUE_GROUP}/{KUEUE_VERSION}"

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "berth"
POLICY_HASH = "berth.dev/policy-hash"
TEAM_LABEL = "berth.dev/team"
DESCRIPTION = "berth.dev/description"
APPROVAL_CHECK = "berth-approval"
APPROVAL_CONTROLLER = "berth.dev/approval"
# Set on an object the configured cluster takes by hand, not from Berth (the
# manifests then show it as instructions): its value says what to do.
MANUAL_STEP = "berth.dev/manual-step"

# Dependencies first: topologies before the flavors that name them, flavors
# and cohorts before the queues that name them, namespaces before the
# LocalQueues in them.
KIND_ORDER = (
    # Kueue's own configuration before the objects it governs.
    "ConfigMap",
    "Namespace",
    "Topology",
    "ResourceFlavor",
    "WorkloadPriorityClass",
    "AdmissionCheck",
    "Cohort",
    "ClusterQueue",
    "LocalQueue",
)


@dataclass
class PolicyBundle:
    """The policy as snapshot dicts (see ``queues.snapshots``)."""

    teams: list[dict[str, Any]] = field(default_factory=list)
    topologies: list[dict[str, Any]] = field(default_factory=list)
    flavors: list[dict[str, Any]] = field(default_factory=list)
    cohorts: list[dict[str, Any]] = field(default_factory=list)
    cluster_queues: list[dict[str, Any]] = field(default_factory=list)
    local_queues: list[dict[str, Any]] = field(default_factory=list)
    priority_classes: list[dict[str, Any]] = field(default_factory=list)
    queue_classes: list[dict[str, Any]] = field(default_factory=list)
    # Kueue's manager configuration (``snapshots.kueue_configuration``); None
    # until an admin saves one, and then no ConfigMap is rendered.
    kueue_configuration: dict[str, Any] | None = None

    @property
    def empty(self) -> bool:
        return not (
            self.topologies
            or self.flavors
            or self.cluster_queues
            or self.cohorts
            or self.teams
            or self.priority_classes
        )


def canonical(value: Any) -> Any:
    """Dicts with sorted keys, recursively: what makes output byte-identical."""
    if isinstance(value, Mapping):
        return {key: canonical(value[key]) for key in sorted(value)}
    if isinstance(value, list | tuple):
        return [canonical(item) for item in value]
    return value


def content_hash(obj: Mapping[str, Any]) -> str:
    """What Berth sets on an object, hashed: spec (or value, or a ConfigMap's
    data), labels other than the hash itself, annotations, identity."""
    metadata = obj.get("metadata", {})
    labels = {k: v for k, v in metadata.get("labels", {}).items() if k != POLICY_HASH}
    material = {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "name": metadata.get("name"),
        "namespace": metadata.get("namespace"),
        "labels": labels,
        "annotations": metadata.get("annotations", {}),
        "spec": obj.get("spec"),
        "value": obj.get("value"),
    }
    if "data" in obj:
        # Only where there is data, so every other object keeps the hash it had.
        material["data"] = obj["data"]
    digest = hashlib.sha256(json.dumps(canonical(material), separators=(",", ":")).encode())
    return digest.hexdigest()[:16]


def _object(
    kind: str,
    name: str,
    *,
    api: str = KUEUE_API,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    **body: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": {MANAGED_BY: MANAGER, **(labels or {})}}
    if namespace is not None:
        metadata["namespace"] = namespace
    if annotations:
        metadata["annotations"] = dict(annotations)
    obj = {"apiVersion": api, "kind": kind, "metadata": metadata, **body}
    obj["metadata"]["labels"][POLICY_HASH] = content_hash(obj)
    return canonical(obj)


def _resource_groups(groups: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    rendered = []
    for group in groups:
        flavors = []
        for flavor in group["flavors"]:
            resources = []
            for quota in flavor["resources"]:
                entry = {"name": quota["name"], "nominalQuota": quota["nominal_quota"]}
                if quota.get("borrowing_limit") is not None:
                    entry["borrowingLimit"] = quota["borrowing_limit"]
                if quota.get("lending_limit") is not None:
                    entry["lendingLimit"] = quota["lending_limit"]
                resources.append(entry)
            flavors.append({"name": flavor["name"], "resources": resources})
        rendered.append({"coveredResources": list(group["covered_resources"]), "flavors": flavors})
    return rendered


def _tolerations(items: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for item in items:
        toleration = {k: v for k, v in item.items() if k != "toleration_seconds" and v != ""}
        if item.get("toleration_seconds") is not None:
            toleration["tolerationSeconds"] = item["toleration_seconds"]
        out.append(toleration)
    return out


def render_topology(topology: Mapping[str, Any]) -> dict[str, Any]:
    """Kueue's Topology: its levels, widest first, each one node label."""
    levels = [{"nodeLabel": label} for label in topology["levels"]]
    return _object("Topology", topology["name"], spec={"levels": levels})


def render_flavor(flavor: Mapping[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if flavor.get("node_labels"):
        spec["nodeLabels"] = dict(flavor["node_labels"])
    if flavor.get("node_taints"):
        spec["nodeTaints"] = [
            {k: v for k, v in t.items() if v != ""} for t in flavor["node_taints"]
        ]
    if flavor.get("tolerations"):
        spec["tolerations"] = _tolerations(flavor["tolerations"])
    if flavor.get("topology_name"):
        spec["topologyName"] = flavor["topology_name"]
    return _object(
        "ResourceFlavor",
        flavor["name"],
        spec=spec,
        labels={"berth.dev/capacity-type": flavor.get("capacity_type", "on-demand")},
    )


def render_cohort(cohort: Mapping[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"fairSharing": {"weight": cohort.get("fair_sharing_weight", "1")}}
    if cohort.get("parent"):
        spec["parentName"] = cohort["parent"]
    if cohort.get("resource_groups"):
        spec["resourceGroups"] = _resource_groups(cohort["resource_groups"])
    return _object("Cohort", cohort["name"], spec=spec)


def _namespace_selector(queue: Mapping[str, Any]) -> dict[str, Any]:
    """A team's queue admits only that team's namespaces; a shared queue every
    namespace Berth manages for a team."""
    if queue.get("team"):
        return {"matchLabels": {TEAM_LABEL: queue["team"]}}
    return {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]}


def render_cluster_queue(queue: Mapping[str, Any], requires_approval: bool) -> dict[str, Any]:
    preemption: dict[str, Any] = {
        "withinClusterQueue": queue["within_cluster_queue"],
        "reclaimWithinCohort": queue["reclaim_within_cohort"],
        "borrowWithinCohort": {"policy": queue["borrow_within_cohort_policy"]},
    }
    threshold = queue.get("borrow_within_cohort_max_priority_threshold")
    if threshold is not None:
        preemption["borrowWithinCohort"]["maxPriorityThreshold"] = threshold
    fungibility: dict[str, Any] = {
        "whenCanBorrow": queue["when_can_borrow"],
        "whenCanPreempt": queue["when_can_preempt"],
    }
    if queue.get("flavor_fungibility_preference"):
        fungibility["preference"] = queue["flavor_fungibility_preference"]
    spec: dict[str, Any] = {
        "namespaceSelector": _namespace_selector(queue),
        "queueingStrategy": queue["queueing_strategy"],
        "preemption": preemption,
        "fairSharing": {"weight": queue.get("fair_sharing_weight", "1")},
        "flavorFungibility": fungibility,
        "stopPolicy": queue.get("stop_policy", "None"),
        "resourceGroups": _resource_groups(queue.get("resource_groups", [])),
    }
    if queue.get("cohort"):
        spec["cohortName"] = queue["cohort"]
    if queue.get("admission_mode"):
        spec["admissionScope"] = {"admissionMode": queue["admission_mode"]}
    if requires_approval:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": APPROVAL_CHECK}]}
    labels = {TEAM_LABEL: queue["team"]} if queue.get("team") else {}
    if queue.get("queue_class"):
        labels["berth.dev/queue-class"] = queue["queue_class"]
    return _object("ClusterQueue", queue["name"], spec=spec, labels=labels)


def render_local_queue(queue: Mapping[str, Any]) -> dict[str, Any]:
    spec = {"clusterQueue": queue["cluster_queue"], "stopPolicy": queue.get("stop_policy", "None")}
    return _object("LocalQueue", queue["name"], namespace=queue["namespace"], spec=spec)


def render_priority_class(priority: Mapping[str, Any]) -> dict[str, Any]:
    annotations = {DESCRIPTION: priority["description"]} if priority.get("description") else None
    return _object(
        "WorkloadPriorityClass", priority["name"], value=priority["value"], annotations=annotations
    )


def render_namespace(name: str, team: str) -> dict[str, Any]:
    return _object("Namespace", name, api="v1", labels={TEAM_LABEL: team})


def render_kueue_manager_config(settings: Mapping[str, Any]) -> dict[str, Any]:
    """ConfigMap kueue-system/kueue-manager-config holding Kueue's Configuration
    for ``settings`` (``queues.kueue.manager_config``)."""
    return _object(
        "ConfigMap",
        manager_config.NAME,
        api="v1",
        namespace=manager_config.NAMESPACE,
        data={manager_config.KEY: manager_config.configuration_yaml(settings)},
    )


def render_admission_check() -> dict[str, Any]:
    return _object("AdmissionCheck", APPROVAL_CHECK, spec={"controllerName": APPROVAL_CONTROLLER})


def sort_key(obj: Mapping[str, Any]) -> tuple[int, str, str]:
    metadata = obj["metadata"]
    return (KIND_ORDER.index(obj["kind"]), metadata.get("namespace", ""), metadata["name"])


def render(bundle: PolicyBundle) -> list[dict[str, Any]]:
    """Every object the policy asks for, in dependency order."""
    approval_classes = {c["name"] for c in bundle.queue_classes if c.get("requires_approval")}
    objects = [
        render_namespace(ns, team["slug"]) for team in bundle.teams for ns in team["namespaces"]
    ]
    objects += [render_topology(t) for t in bundle.topologies]
    objects += [render_flavor(f) for f in bundle.flavors]
    objects += [render_priority_class(p) for p in bundle.priority_classes]
    gated = [q for q in bundle.cluster_queues if q.get("queue_class") in approval_classes]
    if gated:
        objects.append(render_admission_check())
    objects += [render_cohort(c) for c in bundle.cohorts]
    objects += [
        render_cluster_queue(q, q.get("queue_class") in approval_classes)
        for q in bundle.cluster_queues
    ]
    objects += [render_local_queue(q) for q in bundle.local_queues]
    if bundle.kueue_configuration is not None:
        objects.append(render_kueue_manager_config(bundle.kueue_configuration))
    return sorted(objects, key=sort_key)


def identity(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """(kind, namespace, name): how objects are matched between Berth and a cluster."""
    metadata = obj["metadata"]
    return obj["kind"], metadata.get("namespace", ""), metadata["name"]


def to_yaml_documents(objects: Iterable[Mapping[str, Any]]) -> str:
    """Multi-document YAML, key order as rendered. An object marked as a manual
    step (``MANUAL_STEP``) is written as comments saying what to do, so that
    applying the file never applies it."""
    import yaml

    documents = []
    for obj in objects:
        note = obj.get("metadata", {}).get("annotations", {}).get(MANUAL_STEP)
        if note:
            data = obj.get("data") or {}
            body = data.get(manager_config.KEY) or yaml.safe_dump(dict(obj), sort_keys=False)
            documents.append(manager_config.manual_step_comment(note, body))
        else:
            documents.append("---\n" + yaml.safe_dump(dict(obj), sort_keys=False))
    return "".join(documents)
