"""Kueue's manager configuration: the part of Kueue's ``Configuration`` that
Berth keeps (fair sharing, admission fair sharing, waitForPodsReady), as the
YAML Kueue reads from ConfigMap ``kueue-system/kueue-manager-config``, key
``controller_manager_config.yaml``.

Input is the configuration's snapshot (``queues.snapshots.kueue_configuration``:
Kueue's field names already, durations as Go durations). The ConfigMap object
itself is made by ``queues.kueue.render``.

On the embedded simulated cluster reconcile applies the ConfigMap like any
other object, and the embedded Kueue reads it. On a real cluster Berth never
writes it: that ConfigMap holds many settings Berth does not own, and Kueue
reads it only when it starts, so the plan and the manifests show it as a manual
step (``MANUAL_STEP``) instead.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CONFIG_API = "config.kueue.x-k8s.io/v1beta1"
CONFIG_KIND = "Configuration"
NAMESPACE = "kueue-system"
NAME = "kueue-manager-config"
KEY = "controller_manager_config.yaml"
CONTROLLER = "kueue-controller-manager"

MANUAL_STEP = (
    f"manual step: Berth does not write Kueue's manager configuration on this cluster; "
    f"merge these keys into {KEY} of ConfigMap {NAMESPACE}/{NAME} and restart {CONTROLLER} "
    f"(kubectl -n {NAMESPACE} rollout restart deployment {CONTROLLER})"
)


def configuration(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Kueue's ``Configuration`` document for ``settings``: fairSharing always,
    admissionFairSharing and waitForPodsReady only when they are on (absent is
    off, in Kueue as in Berth)."""
    fair = settings["fairSharing"]
    document: dict[str, Any] = {
        "apiVersion": CONFIG_API,
        "kind": CONFIG_KIND,
        "fairSharing": {
            "enable": bool(fair["enable"]),
            "preemptionStrategies": list(fair["preemptionStrategies"]),
        },
    }
    admission = settings.get("admissionFairSharing")
    if admission:
        document["admissionFairSharing"] = {
            "usageHalfLifeTime": admission["usageHalfLifeTime"],
            "usageSamplingInterval": admission["usageSamplingInterval"],
        }
    wait = settings.get("waitForPodsReady")
    if wait:
        requeuing = wait["requeuingStrategy"]
        strategy: dict[str, Any] = {"timestamp": requeuing["timestamp"]}
        # Null is Kueue's "no limit": left out, as Kueue's own default.
        if requeuing.get("backoffLimitCount") is not None:
            strategy["backoffLimitCount"] = requeuing["backoffLimitCount"]
        strategy["backoffBaseSeconds"] = requeuing["backoffBaseSeconds"]
        strategy["backoffMaxSeconds"] = requeuing["backoffMaxSeconds"]
        ready: dict[str, Any] = {
            "enable": True,
            "timeout": wait["timeout"],
            "blockAdmission": bool(wait["blockAdmission"]),
            "requeuingStrategy": strategy,
        }
        if wait.get("recoveryTimeout"):
            ready["recoveryTimeout"] = wait["recoveryTimeout"]
        document["waitForPodsReady"] = ready
    return document


def configuration_yaml(settings: Mapping[str, Any]) -> str:
    """The document as the ConfigMap holds it: fixed key order (apiVersion and
    kind first, as Kueue's own file), so the same settings give the same text."""
    import yaml

    return str(yaml.safe_dump(configuration(settings), sort_keys=False))


def manual_step_comment(note: str, document: str) -> str:
    """What the manifests show instead of the ConfigMap where it is a manual
    step: YAML comments only, so ``kubectl apply -f`` of the manifests can never
    overwrite Kueue's own ConfigMap."""
    lines = [f"# {note}", "#"]
    lines += [f"#   {line}" if line else "#" for line in document.splitlines()]
    return "---\n" + "\n".join(lines) + "\n"
