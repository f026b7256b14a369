"""The gang-fit map and the fragmentation verdict (queues.engine.gang_fit): no
database, nodes and what is placed on them given directly."""

from __future__ import annotations

from queues.engine.gang_fit import (
    ANYWHERE,
    GPU,
    Gang,
    flavor_room,
    fragmentation,
    gang_fit_map,
    gang_sizes,
    gangs,
)
from queues.engine.model import PodSet
from queues.engine.topology import HOSTNAME, ClusterNode, Topology, TopologyRequest

BLOCK, RACK = "topology.berth.dev/block", "topology.berth.dev/rack"
RACKS = Topology("gpu-racks", (BLOCK, RACK, HOSTNAME))
CPU = "cpu"


def node(name: str, rack: str, block: str = "b0", gpus: int = 8) -> ClusterNode:
    return ClusterNode(name, {BLOCK: block, RACK: rack}, {GPU: gpus, CPU: 192_000, "memory": 2**41})


def used_gpus(**free: int) -> dict[str, dict[str, int]]:
    """Node -> usage leaving ``free`` GPUs of 8 (and a little CPU per GPU used)."""
    return {name: {GPU: 8 - left, CPU: (8 - left) * 1000} for name, left in free.items()}


def scattered() -> tuple[list[ClusterNode], dict[str, dict[str, int]]]:
    """16 nodes in 4 racks: 40 GPUs free, but only 2 nodes with all 8 of them."""
    nodes = [node(f"n{i:02d}", rack=f"r{i // 4}") for i in range(16)]
    free = {"n00": 8, "n05": 8, "n01": 4, "n06": 4, "n09": 4}
    free |= {"n02": 2, "n07": 2, "n10": 2, "n13": 2, "n03": 1, "n08": 1, "n11": 1, "n14": 1}
    free |= {name: 0 for name in ("n04", "n12", "n15")}
    return nodes, used_gpus(**free)


EIGHT = {GPU: 8, CPU: 16_000}


def test_a_job_blocked_by_fragmentation_says_so_with_the_node_counts() -> None:
    nodes, used = scattered()
    room = flavor_room("h100-ondemand", RACKS, nodes, used)
    verdict = fragmentation(room, 4, EIGHT)
    assert verdict is not None
    assert (verdict.free_gpus, verdict.nodes_with_room, verdict.room_for) == (40, 2, 2)
    assert verdict.fragmented and not verdict.fits
    assert verdict.others == [(4, 3), (2, 4), (1, 4), (0, 3)]
    assert verdict.message == (
        "needs 4 nodes with 8 free GPUs each; 40 GPUs are free on flavor h100-ondemand "
        "but only 2 nodes have 8 free (others: 3 nodes with 4, 4 nodes with 2, "
        "4 nodes with 1, 3 nodes with none)"
    )


def test_too_few_free_gpus_is_not_fragmentation() -> None:
    nodes, used = scattered()
    verdict = fragmentation(flavor_room("h100", RACKS, nodes, used), 6, EIGHT)
    assert verdict is not None
    assert not verdict.fragmented and not verdict.fits
    assert verdict.message == (
        "needs 6 nodes with 8 free GPUs each (48 GPUs); only 40 GPUs are free on flavor "
        "h100, so it waits for GPUs, not for them to come together"
    )


def test_a_gang_of_whole_nodes_that_fits_is_not_fragmented() -> None:
    nodes, used = scattered()
    verdict = fragmentation(flavor_room("h100", RACKS, nodes, used), 2, EIGHT)
    assert verdict is not None and verdict.fits and not verdict.fragmented


def test_small_pods_share_a_node() -> None:
    nodes, used = scattered()
    verdict = fragmentation(flavor_room("h100", RACKS, nodes, used), 10, {GPU: 4})
    assert verdict is not None
    # 2 nodes hold two pods of 4 each, 3 nodes one: 7 of 10 though 40 GPUs are free.
    assert (verdict.room_for, verdict.nodes_with_room, verdict.fragmented) == (7, 5, True)
    assert "only 5 nodes have 4 free (room for 7 of the 10)" in verdict.message


def test_a_node_with_the_gpus_but_not_the_cpu_has_no_room() -> None:
    nodes = [node("a", "r0"), node("b", "r0")]
    used = {"a": {CPU: 190_000}}  # every GPU free, the CPU gone
    verdict = fragmentation(flavor_room("h100", RACKS, nodes, used), 2, EIGHT)
    assert verdict is not None
    assert (verdict.free_gpus, verdict.nodes_with_room, verdict.fragmented) == (16, 1, True)
    assert verdict.message.endswith("but only 1 node has 8 free (others: 1 node with 8)")


def test_required_rack_spread_over_racks() -> None:
    # Four whole nodes free, but two in r0 and two in r1.
    nodes = [node(f"n{i}", rack=f"r{i // 4}") for i in range(8)]
    used = used_gpus(n2=0, n3=0, n6=0, n7=0)
    room = flavor_room("h100", RACKS, nodes, used)
    anywhere = fragmentation(room, 4, EIGHT)
    assert anywhere is not None and anywhere.fits
    verdict = fragmentation(room, 4, EIGHT, TopologyRequest(RACK, required=True))
    assert verdict is not None
    assert (verdict.level, verdict.domain, verdict.domain_room_for) == (RACK, "b0/r0", 2)
    assert verdict.fragmented and not verdict.fits
    assert verdict.message == (
        "needs 4 nodes with 8 free GPUs each in one rack (topology.berth.dev/rack); "
        "32 GPUs are free on flavor h100 and its nodes have room for 4 such, but the "
        "best rack (b0/r0) has room for only 2"
    )
    # Fewer whole nodes than it needs at all: still told it is one rack it asks for.
    halves = used_gpus(n0=8, n1=4, n2=4, n3=4, n4=8, n5=4, n6=4, n7=4)
    three = fragmentation(
        flavor_room("h100", RACKS, nodes, halves), 3, EIGHT, TopologyRequest(RACK, required=True)
    )
    assert three is not None and three.fragmented
    assert three.message == (
        "needs 3 nodes with 8 free GPUs each in one rack (topology.berth.dev/rack); 40 GPUs "
        "are free on flavor h100 but only 2 nodes have 8 free (others: 6 nodes with 4)"
    )
    # Preferred falls back to anywhere, as Kueue does: it fits.
    preferred = fragmentation(room, 4, EIGHT, TopologyRequest(RACK, required=False))
    assert preferred is not None and preferred.fits


def test_no_gpus_asked_no_verdict() -> None:
    nodes, used = scattered()
    assert fragmentation(flavor_room("h100", RACKS, nodes, used), 4, {CPU: 1000}) is None


def test_a_level_the_topology_lacks_no_verdict() -> None:
    """The gang never fits there; the engine's own sentence names the level."""
    nodes, used = scattered()
    room = flavor_room("h100", RACKS, nodes, used)
    missing = TopologyRequest("example.com/pod", required=True)
    assert fragmentation(room, 4, EIGHT, missing) is None
    assert fragmentation(flavor_room("h100", None, nodes, used), 4, EIGHT, missing) is None


def test_the_map_per_level() -> None:
    nodes, used = scattered()
    fit = gang_fit_map(flavor_room("h100", RACKS, nodes, used))
    assert (fit.nodes, fit.gpus, fit.free_gpus) == (16, 128, 40)
    assert (fit.whole_free_nodes, fit.stranded_gpus) == (2, 24)
    assert round(fit.fragmentation, 2) == 0.6
    assert fit.free_histogram == [(8, 2), (4, 3), (2, 4), (1, 4), (0, 3)]
    whole_anywhere = fit.largest_at(ANYWHERE, 8)
    assert whole_anywhere is not None and whole_anywhere.pods == 2
    rack = fit.largest_at(RACK, 8)
    assert rack is not None and (rack.pods, rack.domain) == (1, "b0/r0")
    four_in_a_rack = fit.largest_at(RACK, 4)
    # r0 (8, 4, 2, 1 free) and r1 (0, 8, 4, 2) both hold 3 pods of 4: the first by name.
    assert four_in_a_rack is not None
    assert (four_in_a_rack.pods, four_in_a_rack.domain) == (3, "b0/r0")
    one = fit.largest_at(HOSTNAME, 1)
    assert one is not None and one.pods == 8
    assert fit.as_dict()["fragmentation"] == 0.6


def test_a_node_without_the_topology_labels_is_left_out() -> None:
    nodes = [node("a", "r0"), ClusterNode("stray", {}, {GPU: 8})]
    fit = gang_fit_map(flavor_room("h100", RACKS, nodes, {}))
    assert [row["name"] for row in fit.node_rows] == ["a"]
    flat = gang_fit_map(flavor_room("h100", None, nodes, {}))
    assert flat.nodes == 2 and flat.levels == []


def test_gang_sizes() -> None:
    assert gang_sizes(8) == [1, 2, 4, 8]
    assert gang_sizes(6) == [1, 2, 4, 6]
    assert gang_sizes(0) == []


def test_pod_sets_of_one_shape_are_one_gang_except_under_a_required_level() -> None:
    master, worker = PodSet("Master", 1, EIGHT), PodSet("Worker", 3, EIGHT)
    launcher = PodSet("Launcher", 1, {CPU: 1000})
    assert gangs([master, worker, launcher]) == [Gang(4, EIGHT, None), Gang(1, {CPU: 1000}, None)]
    rack = TopologyRequest(RACK, required=True)
    apart = [
        PodSet("Master", 1, EIGHT, topology_request=rack),
        PodSet("Worker", 3, EIGHT, topology_request=rack),
    ]
    # Kueue finds each pod set a rack of its own: judged one by one.
    assert gangs(apart) == [Gang(1, EIGHT, rack), Gang(3, EIGHT, rack)]
