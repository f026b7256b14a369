"""The Kueue CRDs of ``BERTH_CRDS_DIR`` (default ../shared/crds; data, not
copied into the project): their v1beta2 OpenAPI schemas and CEL rules, to check
what Berth renders."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

from tests.envtest import crds_dir
from tests.envtest.controlplane import load_yaml

KUEUE_FOLDER = "kueue-v0.19.2"
FILES = {
    "Topology": "kueue.x-k8s.io_topologies.yaml",
    "ResourceFlavor": "kueue.x-k8s.io_resourceflavors.yaml",
    "Cohort": "kueue.x-k8s.io_cohorts.yaml",
    "ClusterQueue": "kueue.x-k8s.io_clusterqueues.yaml",
    "LocalQueue": "kueue.x-k8s.io_localqueues.yaml",
    "WorkloadPriorityClass": "kueue.x-k8s.io_workloadpriorityclasses.yaml",
    "AdmissionCheck": "kueue.x-k8s.io_admissionchecks.yaml",
    "Workload": "kueue.x-k8s.io_workloads.yaml",
}


@cache
def schema(kind: str, version: str = "v1beta2") -> dict[str, Any]:
    document = load_yaml(crds_dir() / KUEUE_FOLDER / FILES[kind])
    for entry in document["spec"]["versions"]:
        if entry["name"] == version:
            return dict(entry["schema"]["openAPIV3Schema"])
    raise KeyError(f"{kind} has no {version}")


def rules_at(node: dict[str, Any], value: Any, path: str = "") -> Iterator[tuple[str, str, Any]]:
    """(path, rule, value at that path) for every CEL rule the value reaches."""
    for validation in node.get("x-kubernetes-validations", []):
        yield path, validation["rule"], value
    if isinstance(value, dict):
        for key, child in node.get("properties", {}).items():
            if key in value:
                yield from rules_at(child, value[key], f"{path}.{key}")
    elif isinstance(value, list) and "items" in node:
        for index, item in enumerate(value):
            yield from rules_at(node["items"], item, f"{path}[{index}]")


def _has(obj: Any, key: str) -> bool:
    return isinstance(obj, dict) and key in obj


# Each CEL rule in the CRDs for objects Berth renders, as a Python check on a
# newly created object (rules comparing with oldSelf only constrain updates).
CEL: dict[str, Callable[[Any], bool]] = {
    # ClusterQueue
    "!has(self.cohortName) && has(self.resourceGroups) ? self.resourceGroups.all(rg, "
    "rg.flavors.all(f, f.resources.all(r, !has(r.borrowingLimit)))) : true": lambda s: (
        _has(s, "cohortName")
        or not _has(s, "resourceGroups")
        or all(
            "borrowingLimit" not in r
            for g in s["resourceGroups"]
            for f in g["flavors"]
            for r in f["resources"]
        )
    ),
    "self.flavors.all(x, size(x.resources) == size(self.coveredResources))": lambda g: all(
        len(f["resources"]) == len(g["coveredResources"]) for f in g["flavors"]
    ),
    "!(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort) &&  "
    "self.borrowWithinCohort.policy != 'Never')": lambda p: (
        not (
            p.get("reclaimWithinCohort") == "Never"
            and p.get("borrowWithinCohort", {}).get("policy", "Never") != "Never"
        )
    ),
    "!has(self.preference) || (self.whenCanBorrow == 'TryNextFlavor' && "
    "self.whenCanPreempt == 'TryNextFlavor')": lambda f: (
        "preference" not in f
        or (
            f.get("whenCanBorrow") == "TryNextFlavor" and f.get("whenCanPreempt") == "TryNextFlavor"
        )
    ),
    # ResourceFlavor
    "self.all(x, x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])": lambda taints: all(
        t["effect"] in ("NoSchedule", "PreferNoSchedule", "NoExecute") for t in taints
    ),
    "self.all(x, !has(x.key) ? x.operator == 'Exists' : true)": lambda tols: all(
        "key" in t or t.get("operator") == "Exists" for t in tols
    ),
    "self.all(x, has(x.tolerationSeconds) ? x.effect == 'NoExecute' : true)": lambda tols: all(
        "tolerationSeconds" not in t or t.get("effect") == "NoExecute" for t in tols
    ),
    "self.all(x, !has(x.operator) || x.operator in ['Equal', 'Exists'])": lambda tols: all(
        t.get("operator", "Equal") in ("Equal", "Exists") for t in tols
    ),
    "self.all(x, has(x.operator) && x.operator == 'Exists' ? !has(x.value) : true)": lambda tols: (
        all(not (t.get("operator") == "Exists" and "value" in t) for t in tols)
    ),
    "self.all(x, !has(x.effect) || x.effect in ['NoSchedule', 'PreferNoSchedule', "
    "'NoExecute'])": lambda tols: all(
        t.get("effect", "NoSchedule") in ("NoSchedule", "PreferNoSchedule", "NoExecute")
        for t in tols
    ),
    "!has(self.topologyName) || self.nodeLabels.size() >= 1": lambda s: (
        "topologyName" not in s or len(s.get("nodeLabels", {})) >= 1
    ),
    # Topology
    "size(self.filter(i, size(self.filter(j, j == i)) > 1)) == 0": lambda levels: all(
        levels.count(level) == 1 for level in levels
    ),
    "size(self.filter(i, i.nodeLabel == 'kubernetes.io/hostname')) == 0 || "
    "self[size(self) - 1].nodeLabel == 'kubernetes.io/hostname'": lambda levels: (
        all(level["nodeLabel"] != "kubernetes.io/hostname" for level in levels)
        or levels[-1]["nodeLabel"] == "kubernetes.io/hostname"
    ),
}
UPDATE_ONLY = ("oldSelf",)
