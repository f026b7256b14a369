"""Where a job's pods may go: the node selector and tolerations that let them
onto every flavor its queue allows and keep them off the excluded ones (spot
capacity, for a job that may not run there), judged the way Kueue's flavor
assigner judges a pod set.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

HARD_TAINT_EFFECTS = ("NoSchedule", "NoExecute")


class RenderError(ValueError):
    """A spec that cannot be rendered: ``field`` and ``rule`` say which and why."""

    def __init__(self, field: str, rule: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.rule = rule
        self.message = message


@dataclass(frozen=True)
class FlavorShape:
    """What a ResourceFlavor says about its nodes."""

    name: str
    node_labels: dict[str, str]
    node_taints: list[dict[str, str]]  # {"key", "value", "effect"}
    tolerations: list[dict[str, str]]  # the flavor's own (Kueue injects these at admission)
    spot: bool = False
    gpus_per_node: int | None = None


@dataclass(frozen=True)
class Placement:
    """Where the queue's flavors put pods: what every allowed flavor's nodes have in common."""

    node_selector: dict[str, str]  # labels all allowed flavors share
    tolerations: list[dict[str, str]]  # Kubernetes tolerations for the allowed flavors' node taints
    max_gpus_per_node: int | None = None  # informational


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' rule: an empty effect matches every effect; an empty key
    with Exists matches every taint."""
    effect = toleration.get("effect", "")
    if effect and effect != taint.get("effect", ""):
        return False
    operator = toleration.get("operator", "Equal")
    if not toleration.get("key"):
        return operator == "Exists"
    if toleration["key"] != taint.get("key"):
        return False
    return operator == "Exists" or toleration.get("value", "") == taint.get("value", "")


def _toleration_for(taint: Mapping[str, str]) -> dict[str, str]:
    toleration = {"key": taint["key"], "effect": taint.get("effect", "NoSchedule")}
    if taint.get("value"):
        return {**toleration, "operator": "Equal", "value": taint["value"]}
    return {**toleration, "operator": "Exists"}


def _open_taints(
    flavor: FlavorShape, tolerations: Sequence[Mapping[str, str]] = ()
) -> list[dict[str, str]]:
    """The flavor's NoSchedule/NoExecute taints that neither its own
    tolerations nor ``tolerations`` cover."""
    return [
        t
        for t in flavor.node_taints
        if t.get("effect", "NoSchedule") in HARD_TAINT_EFFECTS
        and not any(_tolerates(x, t) for x in (*flavor.tolerations, *tolerations))
    ]


def placement_for(
    allowed: Sequence[FlavorShape], excluded: Sequence[FlavorShape] = ()
) -> Placement:
    """The node selector and tolerations that let pods onto every ``allowed``
    flavor and keep them off every ``excluded`` one, the way Kueue's flavor
    assigner judges it: a flavor is out when the selector names one of its node
    labels with another value, or one of its NoSchedule/NoExecute taints is
    tolerated neither by the pod nor by the flavor's own tolerations.

    Only taints a flavor does not tolerate itself get a toleration: Kueue adds
    the flavor's own tolerations to the pods it admits there."""
    if not allowed:
        raise RenderError("placement", "no-flavor", "the queue offers this job no flavor to run on")
    selector = dict(allowed[0].node_labels)
    for flavor in allowed[1:]:
        selector = {k: v for k, v in selector.items() if flavor.node_labels.get(k) == v}
    needed = {json.dumps(_toleration_for(t)) for f in allowed for t in _open_taints(f)}
    tolerations: list[dict[str, str]] = [json.loads(t) for t in sorted(needed)]
    allowed_names = {f.name for f in allowed}
    for flavor in excluded:
        if flavor.name in allowed_names:
            raise RenderError(
                "placement", "flavor-both", f"flavor {flavor.name} is both allowed and excluded"
            )
        mismatch = any(
            key in flavor.node_labels and flavor.node_labels[key] != value
            for key, value in selector.items()
        )
        if not mismatch and not _open_taints(flavor, tolerations):
            shared = ", ".join(f"{k}={v}" for k, v in sorted(selector.items())) or "none"
            raise RenderError(
                "placement",
                "flavor-not-excludable",
                f"pods cannot be kept off flavor {flavor.name}: it carries every node label the "
                f"allowed flavors share ({shared}) and no taint they leave untolerated",
            )
    gpus = [f.gpus_per_node for f in allowed]
    most = min(g for g in gpus if g is not None) if None not in gpus else None
    return Placement(selector, tolerations, most)
