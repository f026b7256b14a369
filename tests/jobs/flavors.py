"""Flavor shapes the render and placement tests share: on-demand, a reserved
pool behind a taint, and spot capacity."""

from __future__ import annotations

from jobs.placement import FlavorShape, placement_for

SPOT_TAINT = {"key": "berth.dev/spot", "value": "true", "effect": "NoSchedule"}
ONDEMAND = FlavorShape(
    "h100-ondemand",
    {"gpu": "h100", "berth.dev/capacity-type": "on-demand"},
    [],
    [],
    gpus_per_node=8,
)
RESERVED = FlavorShape(
    "h100-reserved",
    {"gpu": "h100", "berth.dev/capacity-type": "on-demand", "pool": "reserved"},
    [{"key": "pool", "value": "reserved", "effect": "NoSchedule"}],
    [],
    gpus_per_node=4,
)
SPOT = FlavorShape(
    "h100-spot", {"gpu": "h100", "berth.dev/capacity-type": "spot"}, [SPOT_TAINT], [], spot=True
)
PLACEMENT = placement_for([ONDEMAND, RESERVED], [SPOT])
