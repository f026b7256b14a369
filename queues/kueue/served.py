"""Kueue objects as an API server serves them: the defaults Kueue's CRDs fill
in where a manifest leaves them out (``as_served``), and who owns a field
(``owner_of``, from ``metadata.managedFields``). The import plans against
files as against a cluster with these, and says which fields change manager.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Kueue's CRD defaults (v1beta2): a field a file leaves out has this value on a cluster.
DEFAULTS = {
    "queueingStrategy": "BestEffortFIFO",
    "stopPolicy": "None",
    "withinClusterQueue": "Never",
    "reclaimWithinCohort": "Never",
    "borrowWithinCohort": "Never",
    "whenCanBorrow": "MayStopSearch",
    "whenCanPreempt": "TryNextFlavor",
    "weight": "1",
}


def as_served(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` as an API server with Kueue's CRDs would hold it: the defaults
    its schema fills in where a file left them out. Planning against files
    then shows the same changes as against a cluster they were applied to."""
    served = dict(obj)
    kind = served.get("kind")
    if kind not in ("ClusterQueue", "LocalQueue", "Cohort") or not isinstance(
        served.get("spec"), Mapping
    ):
        return served
    spec = dict(served["spec"])
    if "fairSharing" in spec:
        spec["fairSharing"] = {"weight": DEFAULTS["weight"], **(spec["fairSharing"] or {})}
    if kind == "LocalQueue":
        spec.setdefault("stopPolicy", DEFAULTS["stopPolicy"])
    if kind == "ClusterQueue":
        spec.setdefault("queueingStrategy", DEFAULTS["queueingStrategy"])
        spec.setdefault("stopPolicy", DEFAULTS["stopPolicy"])
        spec["flavorFungibility"] = {
            "whenCanBorrow": DEFAULTS["whenCanBorrow"],
            "whenCanPreempt": DEFAULTS["whenCanPreempt"],
            **(spec.get("flavorFungibility") or {}),
        }
        preemption = dict(spec.get("preemption") or {})
        preemption.setdefault("withinClusterQueue", DEFAULTS["withinClusterQueue"])
        preemption.setdefault("reclaimWithinCohort", DEFAULTS["reclaimWithinCohort"])
        preemption["borrowWithinCohort"] = {
            "policy": DEFAULTS["borrowWithinCohort"],
            **(preemption.get("borrowWithinCohort") or {}),
        }
        spec["preemption"] = preemption
    served["spec"] = spec
    return served


def _path_parts(path: str) -> list[str]:
    """``spec.preemption.withinClusterQueue`` -> its keys; a list index ends
    the walk (Kueue's lists are owned whole)."""
    parts = []
    for part in path.split("."):
        name = part.split("[", 1)[0]
        parts.append(name)
        if "[" in part:
            break
    return parts


def owner_of(obj: Mapping[str, Any], path: str) -> list[str]:
    """The field managers that own ``path`` (a plan's field path) on ``obj``,
    from ``metadata.managedFields``; empty when nobody does (or the object
    came from a file, which has no managers)."""
    owners = []
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        fields = entry.get("fieldsV1") or {}
        node: Any = fields
        for part in _path_parts(path):
            if not isinstance(node, Mapping) or f"f:{part}" not in node:
                node = None
                break
            node = node[f"f:{part}"]
        if node is not None:
            owners.append(str(entry.get("manager", "?")))
    return sorted(set(owners))
