"""What the simulated cluster's Kueue reads as its policy: the stored
ResourceFlavors, Cohorts, ClusterQueues and WorkloadPriorityClasses, and the
settings of its manager ConfigMap (fair sharing, waitForPodsReady)."""

from __future__ import annotations

import logging
from typing import Any

from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from queues.engine.configuration import manager_configuration
from queues.engine.model import Policy
from queues.engine.scenario import ScenarioError, parse
from queues.kueue.manager_config import KEY as MANAGER_KEY
from queues.kueue.manager_config import NAME as MANAGER_NAME
from queues.kueue.manager_config import NAMESPACE as MANAGER_NAMESPACE

log = logging.getLogger(__name__)


def read_policy(backend: SimulatedBackend) -> Policy | None:
    """The engine's policy from the Kueue objects stored on the simulated cluster,
    with Kueue's manager settings from its ConfigMap; None if they do not load."""

    def bare(kind: str) -> list[dict[str, Any]]:
        return [
            {
                "apiVersion": o["apiVersion"],
                "kind": o["kind"],
                "metadata": {"name": o["metadata"]["name"]},
                **({"spec": o["spec"]} if "spec" in o else {}),
                **({"value": o["value"]} if "value" in o else {}),
            }
            for o in backend.list(TYPES[kind])[0]
        ]

    document = {
        "resourceFlavors": bare("ResourceFlavor"),
        "cohorts": bare("Cohort"),
        "clusterQueues": bare("ClusterQueue"),
        "workloadPriorityClasses": bare("WorkloadPriorityClass"),
        "topologies": bare("Topology"),
        "nodes": _nodes(backend),
        **_manager_configuration(backend),
    }
    try:
        return parse(document, "simulated cluster").policy
    except ScenarioError as exc:
        log.error("the simulated cluster's Kueue objects do not load: %s", exc)
        return None


def _manager_configuration(backend: SimulatedBackend) -> dict[str, Any]:
    """Kueue's manager settings (fair sharing, waitForPodsReady) from its
    ConfigMap, as Kueue reads them; none: Kueue's defaults."""
    config_map = backend.get(TYPES["ConfigMap"], MANAGER_NAME, MANAGER_NAMESPACE)
    if config_map is None:
        return {}
    return manager_configuration(str((config_map.get("data") or {}).get(MANAGER_KEY, "")))


def _nodes(backend: SimulatedBackend) -> list[dict[str, Any]]:
    """The nodes as a scenario lists them: labels and allocatable resources."""
    return [
        {
            "name": node["metadata"]["name"],
            "labels": dict(node["metadata"].get("labels") or {}),
            "capacity": dict((node.get("status") or {}).get("allocatable") or {}),
        }
        for node in backend.list(TYPES["Node"])[0]
        if (node.get("status") or {}).get("allocatable")
    ]
