"""Placement: the node selector and tolerations for the flavors a queue
allows, checked against the engine's own flavor-assignment rules.

Pure: no database."""

from __future__ import annotations

import dataclasses

import pytest

from jobs.placement import FlavorShape, Placement, RenderError, placement_for
from queues.engine.assign import selector_mismatch, untolerated_taint
from queues.engine.model import PodSet, ResourceFlavor, Taint, Toleration
from tests.jobs.flavors import ONDEMAND, PLACEMENT, RESERVED, SPOT, SPOT_TAINT

GPU = "nvidia.com/gpu"


def engine_flavor(shape: FlavorShape) -> ResourceFlavor:
    return ResourceFlavor(
        shape.name,
        dict(shape.node_labels),
        tuple(Taint(t["key"], t.get("value", ""), t["effect"]) for t in shape.node_taints),
        tuple(Toleration(**t) for t in shape.tolerations),
    )


def engine_admits(placement: Placement, shape: FlavorShape) -> bool:
    pod_set = PodSet(
        "main",
        1,
        {GPU: 1},
        dict(placement.node_selector),
        tuple(Toleration(**t) for t in placement.tolerations),
    )
    flavor = engine_flavor(shape)
    return untolerated_taint(pod_set, flavor) is None and selector_mismatch(pod_set, flavor) is None


def test_placement_is_what_the_allowed_flavors_share() -> None:
    expected = Placement(
        {"gpu": "h100", "berth.dev/capacity-type": "on-demand"},
        [{"key": "pool", "operator": "Equal", "value": "reserved", "effect": "NoSchedule"}],
        max_gpus_per_node=4,
    )
    assert expected == PLACEMENT
    # The engine (Kueue's flavor assigner) agrees: in on both allowed, out of spot.
    assert engine_admits(PLACEMENT, ONDEMAND) and engine_admits(PLACEMENT, RESERVED)
    assert not engine_admits(PLACEMENT, SPOT)


def test_spot_allowed_tolerates_the_spot_taint() -> None:
    placement = placement_for([ONDEMAND, SPOT])
    assert placement.node_selector == {"gpu": "h100"}
    assert placement.tolerations == [
        {"key": "berth.dev/spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    ]
    assert placement.max_gpus_per_node is None  # the spot flavor's node size is unknown
    assert engine_admits(placement, ONDEMAND) and engine_admits(placement, SPOT)


def test_a_flavor_tolerating_its_own_taint_needs_no_toleration() -> None:
    """Kueue adds a flavor's tolerations to the pods it admits there."""
    spot = dataclasses.replace(
        SPOT, tolerations=[{"key": "berth.dev/spot", "operator": "Exists", "effect": "NoSchedule"}]
    )
    soft = FlavorShape(
        "soft", {"gpu": "h100"}, [{"key": "k", "value": "v", "effect": "PreferNoSchedule"}], []
    )
    placement = placement_for([spot, soft])
    assert placement.tolerations == []
    assert engine_admits(placement, spot) and engine_admits(placement, soft)


def test_an_excluded_flavor_that_cannot_be_told_apart_is_refused() -> None:
    twin = FlavorShape("h100-twin", {"gpu": "h100", "berth.dev/capacity-type": "on-demand"}, [], [])
    with pytest.raises(RenderError) as caught:
        placement_for([ONDEMAND], [twin])
    assert caught.value.rule == "flavor-not-excludable" and "h100-twin" in str(caught.value)
    # A taint the placement does not tolerate keeps it out, though.
    tainted = dataclasses.replace(twin, node_taints=[SPOT_TAINT])
    assert not engine_admits(placement_for([ONDEMAND], [tainted]), tainted)
    with pytest.raises(RenderError, match="no flavor"):
        placement_for([])
    with pytest.raises(RenderError, match="both allowed and excluded"):
        placement_for([ONDEMAND], [ONDEMAND])
