"""Topology-aware placement: where a pod set's pods would go on the nodes of a
flavor that names a Kueue Topology (levels such as block, rack, host, from node
labels), so that a gang that fits the quota but not in one rack is not
promised a start.

A pod set may ask for its pods to share a domain at a level, required
(``topologyRequest.required``: all in one, or it does not fit) or preferred
(that level if it can, else the next level up, else anywhere in the flavor);
without a request its pods go anywhere the nodes have room. Among the domains
that can hold every pod, the one with the least room is taken (best fit, as
Kueue's default), ties by name; within it the nodes with the most room fill
first. Simplifications against Kueue: no slices, leaders or balanced
placement, and a head that needs preemption is checked against the flavor's
nodes as if empty (Kueue's simulate-empty check) rather than with its victims
gone.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from mypy_extensions import mypyc_attr

from queues.engine.frozen_copies import rebuilt_by_fields

HOSTNAME = "kubernetes.io/hostname"


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class Topology:
    name: str
    levels: tuple[str, ...]  # node labels, widest domain first


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class ClusterNode:
    name: str
    labels: dict[str, str]
    capacity: dict[str, int]  # allocatable, in the engine's canonical units


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class TopologyRequest:
    level: str
    required: bool

    @classmethod
    def from_kueue(cls, raw: object) -> TopologyRequest | None:
        """From a Workload pod set's ``topologyRequest`` (``required`` or
        ``preferred``: a level's node label); None without one."""
        if not isinstance(raw, Mapping):
            return None
        for kind in ("required", "preferred"):
            level = raw.get(kind)
            if isinstance(level, str) and level:
                return cls(level, required=kind == "required")
        return None


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class Placement:
    """Pods per node for one pod set; ``fits`` is how many of ``wanted`` the
    best domain could hold (all of them when ``nodes`` is set)."""

    wanted: int
    fits: int
    nodes: dict[str, int] = field(default_factory=dict)
    missing_level: str | None = None  # the request names a level the topology lacks

    @property
    def placed(self) -> bool:
        return bool(self.nodes) or self.wanted == 0


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Placer:
    """The free room of every node of the topology-aware flavors, and where
    each admitted workload's pods are."""

    def __init__(
        self,
        topologies: Mapping[str, Topology],  # flavor name -> its topology
        nodes: Mapping[str, list[ClusterNode]],  # flavor name -> the nodes it selects
    ) -> None:
        self.topologies = dict(topologies)
        self.nodes = {flavor: list(found) for flavor, found in nodes.items()}
        # The nodes carrying every level's label, and their domains per level:
        # fixed for the placer's life, and asked for at every placement.
        self.eligible = {
            flavor: tuple(
                node
                for node in found
                if all(level == HOSTNAME or level in node.labels for level in topology.levels)
            )
            for flavor, found in self.nodes.items()
            if (topology := self.topologies.get(flavor)) is not None
        }
        self.domain_cache: dict[tuple[str, int], dict[tuple[str, ...], list[str]]] = {}
        self.used: dict[str, dict[str, int]] = {}  # node -> resource -> amount
        self.held: dict[str, list[tuple[str, dict[str, int]]]] = {}  # workload -> usage
        # workload -> pod set -> node -> pods
        self.pods_on: dict[str, dict[str, dict[str, int]]] = {}

    def handles(self, flavor: str) -> bool:
        return flavor in self.topologies

    # ---------------------------------------------------------- placement

    def place(
        self,
        flavor: str,
        per_pod: Mapping[str, int],
        count: int,
        request: TopologyRequest | None,
        *,
        empty: bool = False,
        without: Collection[str] = (),
        also: Mapping[str, Mapping[str, int]] | None = None,
    ) -> Placement:
        """Where ``count`` pods would go now; ``empty``: on the nodes as if
        nothing ran there; ``without``: as if those workloads had gone;
        ``also``: node -> resource -> amount taken besides (the same workload's
        pod sets placed before this one, which Kueue assumes in either case)."""
        topology = self.topologies[flavor]
        if request is not None and request.level not in topology.levels:
            return Placement(count, 0, missing_level=request.level)
        used = {} if empty else self._used_without(without)
        if also:
            used = _plus(used, also)
        room = {node.name: self._pods_fit(node, per_pod, used) for node in self._eligible(flavor)}
        placement = Placement(count, 0)
        for level in _levels_to_try(topology, request):
            domains = self._domains(flavor, topology, level)
            for _, members in sorted(domains.items(), key=lambda d: (_room(d[1], room), d[0])):
                total = _room(members, room)
                placement.fits = max(placement.fits, total)
                if total >= count:
                    placement.fits = count
                    placement.nodes = _fill(members, room, count)
                    return placement
        return placement

    def message(self, flavor: str, placement: Placement) -> str:
        name = self.topologies[flavor].name
        if placement.missing_level is not None:
            return f'topology "{name}" has no level "{placement.missing_level}"'
        if placement.fits == 0:
            return f'topology "{name}" doesn\'t allow to fit any of {placement.wanted} pod(s)'
        return (
            f'topology "{name}" allows to fit only {placement.fits} out of '
            f"{placement.wanted} pod(s)"
        )

    def _eligible(self, flavor: str) -> Iterable[ClusterNode]:
        return self.eligible.get(flavor, ())

    def _used_without(self, gone: Collection[str]) -> Mapping[str, Mapping[str, int]]:
        if not gone:
            return self.used
        used = {node: dict(amounts) for node, amounts in self.used.items()}
        for key in gone:
            for node, usage in self.held.get(key, []):
                for resource, amount in usage.items():
                    used[node][resource] = used[node].get(resource, 0) - amount
        return used

    def _pods_fit(
        self,
        node: ClusterNode,
        per_pod: Mapping[str, int],
        used_by: Mapping[str, Mapping[str, int]],
    ) -> int:
        used = used_by.get(node.name, {})
        fits: int | None = None
        for resource, amount in per_pod.items():
            if amount <= 0:
                continue
            free = node.capacity.get(resource, 0) - used.get(resource, 0)
            pods = max(0, free) // amount
            fits = pods if fits is None else min(fits, pods)
        return fits if fits is not None else 10**9  # asks for nothing a node counts

    def _domains(
        self, flavor: str, topology: Topology, level: int
    ) -> dict[tuple[str, ...], list[str]]:
        """The flavor's eligible nodes grouped by their domain at ``level``
        (-1: the whole flavor); computed once per level (callers only read it)."""
        cached = self.domain_cache.get((flavor, level))
        if cached is not None:
            return cached
        domains: dict[tuple[str, ...], list[str]] = {}
        for node in self._eligible(flavor):
            path = tuple(
                node.name if label == HOSTNAME else node.labels[label]
                for label in topology.levels[: level + 1]
            )
            domains.setdefault(path, []).append(node.name)
        self.domain_cache[(flavor, level)] = domains
        return domains

    # ------------------------------------------------------------- usage

    def hold(
        self, key: str, pod_set: str, per_pod: Mapping[str, int], nodes: Mapping[str, int]
    ) -> None:
        for node, pods in nodes.items():
            usage = {resource: amount * pods for resource, amount in per_pod.items()}
            used = self.used.setdefault(node, {})
            for resource, amount in usage.items():
                used[resource] = used.get(resource, 0) + amount
            self.held.setdefault(key, []).append((node, usage))
            placed = self.pods_on.setdefault(key, {}).setdefault(pod_set, {})
            placed[node] = placed.get(node, 0) + pods

    def release(self, key: str) -> None:
        self.pods_on.pop(key, None)
        for node, usage in self.held.pop(key, []):
            used = self.used.get(node, {})
            for resource, amount in usage.items():
                used[resource] = used.get(resource, 0) - amount


def _plus(
    used: Mapping[str, Mapping[str, int]], extra: Mapping[str, Mapping[str, int]]
) -> dict[str, Mapping[str, int]]:
    merged: dict[str, Mapping[str, int]] = dict(used)
    for node, amounts in extra.items():
        total = dict(merged.get(node, {}))
        for resource, amount in amounts.items():
            total[resource] = total.get(resource, 0) + amount
        merged[node] = total
    return merged


def add_pods(
    taken: dict[str, dict[str, int]], per_pod: Mapping[str, int], nodes: Mapping[str, int]
) -> None:
    """Adds ``nodes``' pods of ``per_pod`` each to ``taken`` (node -> resource -> amount)."""
    for node, pods in nodes.items():
        total = taken.setdefault(node, {})
        for resource, amount in per_pod.items():
            total[resource] = total.get(resource, 0) + amount * pods


def _levels_to_try(topology: Topology, request: TopologyRequest | None) -> list[int]:
    if request is None:
        return [-1]
    index = topology.levels.index(request.level)
    if request.required:
        return [index]
    return [*range(index, -1, -1), -1]


def _room(members: list[str], room: Mapping[str, int]) -> int:
    return sum(room[name] for name in members)


def _fill(members: list[str], room: Mapping[str, int], count: int) -> dict[str, int]:
    """Kueue's best fit inside a domain: the nodes with the most room are filled
    whole until the rest fits on one, and the rest goes on the node with the
    least room that holds it, so small pods pack onto busy nodes and leave
    whole nodes free for wide ones."""
    ordered = sorted(members, key=lambda n: (-room[n], n))
    placed: dict[str, int] = {}
    remaining = count
    for index, name in enumerate(ordered):
        if remaining <= 0:
            break
        fitting = [n for n in ordered[index:] if room[n] >= remaining]
        if fitting:
            best = min(fitting, key=lambda n: (room[n], n))
            placed[best] = remaining
            return placed
        if room[name]:
            placed[name] = room[name]
            remaining -= room[name]
    return placed


rebuilt_by_fields(Topology, ClusterNode, TopologyRequest)
