"""A scenario's topology-aware part: Kueue's ``Topology`` objects (levels of
node labels) and the cluster's ``nodes`` that topology-aware flavors place
pods on, with ``count`` to repeat a node shape.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queues.engine.reading import Reader, read_labels
from queues.engine.topology import HOSTNAME, ClusterNode, Topology
from queues.quantity import QuantityError, to_canonical

NODE_FIELDS = ("name", "count", "labels", "capacity")


def read_topologies(reader: Reader, raw: Any, unwrap: Any) -> dict[str, Topology]:
    topologies: dict[str, Topology] = {}
    for i, entry in enumerate(reader.items("topologies", raw)):
        path = f"topologies[{i}]"
        name, spec = unwrap(reader, path, entry)
        name = reader.name(f"{path}.name", name)
        spec = reader.mapping(path, spec, ("levels",))
        levels: list[str] = []
        for j, level in enumerate(reader.items(f"{path}.levels", spec.get("levels"))):
            block = reader.mapping(f"{path}.levels[{j}]", level, ("nodeLabel",))
            label = block.get("nodeLabel")
            if not isinstance(label, str) or not label:
                reader.error(f"{path}.levels[{j}].nodeLabel", "required", "must name a node label")
                continue
            if label in levels:
                reader.error(f"{path}.levels[{j}].nodeLabel", "duplicate", f"{label!r} twice")
                continue
            levels.append(label)
        if not levels:
            reader.error(f"{path}.levels", "required", "must list at least one level")
        elif HOSTNAME in levels and levels[-1] != HOSTNAME:
            reader.error(
                f"{path}.levels", "hostname-last", f"{HOSTNAME} can only be the lowest level"
            )
        if name in topologies:
            reader.error(f"{path}.name", "duplicate", f"topology {name!r} is defined twice")
        topologies[name] = Topology(name, tuple(levels))
    return topologies


def read_nodes(reader: Reader, raw: Any) -> tuple[ClusterNode, ...]:
    nodes: list[ClusterNode] = []
    for i, entry in enumerate(reader.items("nodes", raw)):
        path = f"nodes[{i}]"
        spec = reader.mapping(path, entry, NODE_FIELDS)
        name = reader.name(f"{path}.name", spec.get("name"))
        count = reader.integer(f"{path}.count", spec.get("count"), None)
        if count is not None and count < 1:
            reader.error(f"{path}.count", "range", "must be at least 1")
            count = None
        labels = read_labels(reader, f"{path}.labels", spec.get("labels"))
        capacity = _capacity(reader, f"{path}.capacity", spec.get("capacity"))
        names = [name] if count is None else [f"{name}-{k}" for k in range(count)]
        for node_name in names:
            nodes.append(ClusterNode(node_name, {**labels, HOSTNAME: node_name}, capacity))
    seen: set[str] = set()
    for node in nodes:
        if node.name in seen:
            reader.error("nodes", "duplicate", f"node {node.name!r} is defined twice")
        seen.add(node.name)
    return tuple(nodes)


def _capacity(reader: Reader, path: str, raw: Any) -> dict[str, int]:
    if not isinstance(raw, Mapping) or not raw:
        reader.error(path, "required", "must give the node's allocatable resources")
        return {}
    capacity: dict[str, int] = {}
    for resource, amount in raw.items():
        try:
            capacity[str(resource)] = to_canonical(str(resource), amount)
        except QuantityError as exc:
            reader.error(f"{path}.{resource}", f"quantity-{exc.rule}", str(exc))
    return capacity
