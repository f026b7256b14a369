"""Kueue's compressed topologyAssignment: what Berth writes reads back, and
every variation Kueue writes (the CRD's own examples) reads as Kueue means it."""

from __future__ import annotations

from queues.kueue.topology_assignment import HOSTNAME, decode, encode, pods_per_node

BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"


def test_what_berth_writes_reads_back() -> None:
    domains = [(("node-a",), 2), (("node-b",), 1)]
    assert decode(encode([HOSTNAME], domains)) == ([HOSTNAME], domains)
    assert pods_per_node(encode([HOSTNAME], domains)) == {"node-a": 2, "node-b": 1}
    assert decode(encode([HOSTNAME], [])) == ([HOSTNAME], [])


def test_individual_values_and_counts() -> None:
    """The CRD's example 1: 4 pods in rack-1 and 2 in rack-2 of block-1."""
    assignment = {
        "levels": [BLOCK, RACK],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [
                    {"individual": {"roots": ["block-1", "block-1"]}},
                    {"individual": {"roots": ["rack-1", "rack-2"]}},
                ],
                "podCounts": {"individual": [4, 2]},
            }
        ],
    }
    assert decode(assignment) == (
        [BLOCK, RACK],
        [(("block-1", "rack-1"), 4), (("block-1", "rack-2"), 2)],
    )
    assert pods_per_node(assignment) is None  # not by hostname: no nodes named


def test_universal_values_prefixes_and_several_slices() -> None:
    """The CRD's examples 2 and 4: a universal value, a common prefix, slices."""
    by_rack = {
        "levels": [BLOCK, RACK],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [
                    {"universal": "block-1"},
                    {"individual": {"prefix": "rack-", "roots": ["1", "2"]}},
                ],
                "podCounts": {"individual": [4, 2]},
            }
        ],
    }
    assert decode(by_rack)[1] == [(("block-1", "rack-1"), 4), (("block-1", "rack-2"), 2)]
    by_host = {
        "levels": [HOSTNAME],
        "slices": [
            {
                "domainCount": 4,
                "valuesPerLevel": [
                    {
                        "individual": {
                            "prefix": "block-1-rack-1-node-",
                            "roots": ["1", "2", "3", "4"],
                        }
                    }
                ],
                "podCounts": {"universal": 1},
            },
            {
                "domainCount": 2,
                "valuesPerLevel": [
                    {"individual": {"prefix": "b1-r2-", "suffix": "-gpu", "roots": ["1", "2"]}}
                ],
                "podCounts": {"universal": 1},
            },
        ],
    }
    placed = pods_per_node(by_host)
    assert placed is not None and len(placed) == 6
    assert placed["block-1-rack-1-node-3"] == 1 and placed["b1-r2-2-gpu"] == 1


def test_a_slice_that_does_not_add_up_is_skipped() -> None:
    broken = {
        "levels": [HOSTNAME],
        "slices": [
            {"domainCount": 2, "valuesPerLevel": [{"individual": {"roots": ["a"]}}],
             "podCounts": {"universal": 1}},
            {"domainCount": 1, "valuesPerLevel": [{"universal": "b"}],
             "podCounts": {"individual": [3]}},
        ],
    }  # fmt: skip
    assert pods_per_node(broken) == {"b": 3}
