"""The gang-fit verdict agrees with the engine's placer (queues.engine.topology),
whatever the nodes hold: a gang the verdict says fits is the gang the placer
places, in one domain when one is required; and the map's largest gang at a
level is the most such pods the placer can put in one domain there."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from queues.engine.gang_fit import GPU, flavor_room, fragmentation, gang_fit_map
from queues.engine.topology import HOSTNAME, ClusterNode, Placer, Topology, TopologyRequest

BLOCK, RACK = "topology.berth.dev/block", "topology.berth.dev/rack"
RACKS = Topology("gpu-racks", (BLOCK, RACK, HOSTNAME))
LEVELS = [None, (BLOCK, True), (RACK, True), (HOSTNAME, True), (RACK, False)]


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[ClusterNode], dict[str, dict[str, int]]]:
    count = draw(st.integers(1, 12))
    nodes, used = [], {}
    for index in range(count):
        name = f"n{index:02d}"
        rack = draw(st.integers(0, 3))
        gpus = draw(st.sampled_from([4, 8]))
        nodes.append(
            ClusterNode(name, {BLOCK: f"b{rack // 2}", RACK: f"r{rack}"}, {GPU: gpus, "cpu": 64})
        )
        used[name] = {GPU: draw(st.integers(0, gpus)), "cpu": draw(st.integers(0, 64))}
    return nodes, used


@settings(max_examples=300, deadline=None)
@given(
    clusters(),
    st.integers(1, 10),
    st.sampled_from([1, 2, 4, 8]),
    st.integers(0, 16),
    st.sampled_from(LEVELS),
)
def test_the_verdict_fits_exactly_when_the_placer_places(
    cluster: tuple[list[ClusterNode], dict[str, dict[str, int]]],
    count: int,
    gpus: int,
    cpu: int,
    level: tuple[str, bool] | None,
) -> None:
    nodes, used = cluster
    per_pod = {GPU: gpus, "cpu": cpu}
    request = TopologyRequest(*level) if level is not None else None
    placer = Placer({"h100": RACKS}, {"h100": nodes})
    placer.used = {name: dict(amounts) for name, amounts in used.items()}
    placed = placer.place("h100", per_pod, count, request)
    verdict = fragmentation(flavor_room("h100", RACKS, nodes, used), count, per_pod, request)
    assert verdict is not None
    assert verdict.fits == placed.placed
    if verdict.fragmented:
        assert not placed.placed and verdict.free_gpus >= count * gpus


@settings(max_examples=200, deadline=None)
@given(clusters(), st.sampled_from([1, 2, 4, 8]), st.sampled_from([BLOCK, RACK, HOSTNAME]))
def test_the_largest_gang_is_the_most_the_placer_puts_in_one_domain(
    cluster: tuple[list[ClusterNode], dict[str, dict[str, int]]], gpus: int, level: str
) -> None:
    nodes, used = cluster
    found = gang_fit_map(flavor_room("h100", RACKS, nodes, used)).largest_at(level, gpus)
    if found is None:  # no node as large as that
        assert all(node.capacity[GPU] < gpus for node in nodes)
        return
    placer = Placer({"h100": RACKS}, {"h100": nodes})
    placer.used = {name: {GPU: amounts[GPU]} for name, amounts in used.items()}
    required = TopologyRequest(level, required=True)
    if found.pods:
        assert placer.place("h100", {GPU: gpus}, found.pods, required).placed
    assert not placer.place("h100", {GPU: gpus}, found.pods + 1, required).placed
