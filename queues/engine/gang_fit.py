"""The gang-fit map: per flavor, the free GPUs of each node and the largest gang
(nodes x GPUs per node) that fits in one domain of each topology level now;
and the verdict on a waiting multi-node job, when the GPUs it needs are free
in total but scattered over nodes (fragmentation), with the node counts.

A node's free room is its allocatable resources less what is placed on it.
What is placed comes from the caller (``cluster.gang_fit`` reads Kueue's
topology assignments); this module only counts. A pod fits on a node when
every resource it asks for fits (as ``queues.engine.topology`` counts it), so
a gang of ``count`` pods fits a domain when the pods its nodes can each hold
add up to ``count``.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from mypy_extensions import mypyc_attr

from queues.engine.frozen_copies import rebuilt_by_fields
from queues.engine.model import PodSet
from queues.engine.topology import HOSTNAME, ClusterNode, Topology, TopologyRequest

GPU = "nvidia.com/gpu"
# The level that is the whole flavor: no topology request, or a preferred one
# that found no narrower domain.
ANYWHERE = ""


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class NodeRoom:
    """One node of a flavor: its allocatable GPUs and what is free of each resource."""

    name: str
    gpus: int
    free: dict[str, int]
    # Its domain at each topology level (label -> value), widest first.
    domains: tuple[tuple[str, str], ...] = ()

    @property
    def free_gpus(self) -> int:
        return max(0, self.free.get(GPU, 0))

    def pods(self, per_pod: Mapping[str, int]) -> int:
        """How many pods asking ``per_pod`` fit here now."""
        fits: int | None = None
        for resource, amount in per_pod.items():
            if amount <= 0:
                continue
            held = max(0, self.free.get(resource, 0)) // amount
            fits = held if fits is None else min(fits, held)
        return fits if fits is not None else 0


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class FlavorRoom:
    """The nodes a flavor selects, with the levels of its topology (none: the
    flavor is placed as a whole)."""

    flavor: str
    topology: Topology | None
    nodes: tuple[NodeRoom, ...]

    @property
    def levels(self) -> tuple[str, ...]:
        return self.topology.levels if self.topology is not None else ()

    def domains(self, level: str) -> dict[str, list[NodeRoom]]:
        """The nodes grouped by their domain at ``level`` (ANYWHERE: one group)."""
        if level == ANYWHERE:
            return {self.flavor: list(self.nodes)} if self.nodes else {}
        index = self.levels.index(level)
        found: dict[str, list[NodeRoom]] = {}
        for node in self.nodes:
            path = "/".join(value for _, value in node.domains[: index + 1])
            found.setdefault(path, []).append(node)
        return found


def flavor_room(
    flavor: str,
    topology: Topology | None,
    nodes: Sequence[ClusterNode],
    used: Mapping[str, Mapping[str, int]],
) -> FlavorRoom:
    """A flavor's nodes with ``used`` (node -> resource -> amount placed there)
    taken off their allocatable resources. A node lacking a topology label is
    left out, as Kueue leaves it out of the topology."""
    levels = topology.levels if topology is not None else ()
    rooms = []
    for node in sorted(nodes, key=lambda n: n.name):
        labels = {**node.labels, HOSTNAME: node.name}
        if any(level not in labels for level in levels):
            continue
        taken = used.get(node.name, {})
        free = {
            resource: amount - taken.get(resource, 0) for resource, amount in node.capacity.items()
        }
        rooms.append(
            NodeRoom(
                node.name,
                int(node.capacity.get(GPU, 0)),
                free,
                tuple((level, labels[level]) for level in levels),
            )
        )
    return FlavorRoom(flavor, topology, tuple(rooms))


# ------------------------------------------------------------------ the map


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class LargestGang:
    """The most pods of ``gpus_per_node`` GPUs that one domain of ``level``
    holds now, and which domain (the first by name among equals)."""

    level: str
    gpus_per_node: int
    pods: int
    domain: str


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class GangFitMap:
    flavor: str
    topology: str | None
    levels: list[str]
    nodes: int
    gpus: int
    free_gpus: int
    # Nodes with every GPU free, and the free GPUs on nodes partly in use:
    # a gang of whole nodes cannot use those.
    whole_free_nodes: int
    stranded_gpus: int
    # [free GPUs, nodes with that many free], most free first.
    free_histogram: list[tuple[int, int]]
    # Per node: name, GPUs, free GPUs, its domains (label -> value).
    node_rows: list[dict[str, Any]]
    largest: list[LargestGang] = field(default_factory=list)

    @property
    def fragmentation(self) -> float:
        """The share of free GPUs that sit on nodes partly in use (0 to 1)."""
        return self.stranded_gpus / self.free_gpus if self.free_gpus else 0.0

    def largest_at(self, level: str, gpus_per_node: int) -> LargestGang | None:
        for gang in self.largest:
            if gang.level == level and gang.gpus_per_node == gpus_per_node:
                return gang
        return None

    def as_dict(self) -> dict[str, Any]:
        answer = asdict(self)
        answer["free_histogram"] = [list(pair) for pair in self.free_histogram]
        answer["fragmentation"] = round(self.fragmentation, 4)
        return answer


def gang_sizes(node_gpus: int) -> list[int]:
    """The GPUs per node a map reports: powers of two up to the largest node,
    and the largest node itself."""
    sizes, size = [], 1
    while size < node_gpus:
        sizes.append(size)
        size *= 2
    if node_gpus > 0:
        sizes.append(node_gpus)
    return sizes


def largest_gang(
    room: FlavorRoom,
    level: str,
    gpus_per_node: int,
    domains: Mapping[str, list[NodeRoom]] | None = None,
) -> LargestGang:
    """``domains``: ``room.domains(level)``, when the caller has it already."""
    best_pods, best_domain = 0, ""
    grouped = room.domains(level) if domains is None else domains
    for domain, members in sorted(grouped.items()):
        pods = sum(node.free_gpus // gpus_per_node for node in members)
        if pods > best_pods:
            best_pods, best_domain = pods, domain
    return LargestGang(level, gpus_per_node, best_pods, best_domain)


def gang_fit_map(room: FlavorRoom) -> GangFitMap:
    free_gpus = sum(node.free_gpus for node in room.nodes)
    whole = [node for node in room.nodes if node.gpus > 0 and node.free_gpus >= node.gpus]
    histogram: dict[int, int] = {}
    for node in room.nodes:
        histogram[node.free_gpus] = histogram.get(node.free_gpus, 0) + 1
    levels = [ANYWHERE, *room.levels]
    grouped = {level: room.domains(level) for level in levels}
    node_gpus = max((node.gpus for node in room.nodes), default=0)
    return GangFitMap(
        flavor=room.flavor,
        topology=room.topology.name if room.topology is not None else None,
        levels=list(room.levels),
        nodes=len(room.nodes),
        gpus=sum(node.gpus for node in room.nodes),
        free_gpus=free_gpus,
        whole_free_nodes=len(whole),
        stranded_gpus=free_gpus - sum(node.free_gpus for node in whole),
        free_histogram=sorted(histogram.items(), reverse=True),
        node_rows=[
            {
                "name": node.name,
                "gpus": node.gpus,
                "free_gpus": node.free_gpus,
                "domains": dict(node.domains),
            }
            for node in room.nodes
        ],
        largest=[
            largest_gang(room, level, size, grouped[level])
            for level in levels
            for size in gang_sizes(node_gpus)
        ],
    )


# -------------------------------------------------------------- the verdict


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class Fragmentation:
    """Why ``pods`` pods of ``gpus_per_pod`` GPUs find no room on ``flavor``
    now. ``fragmented``: the flavor has the GPUs free in total (in one domain
    of ``level`` when the job requires one), only not together."""

    flavor: str
    pods: int
    gpus_per_pod: int
    free_gpus: int
    # Nodes with room for at least one pod, and the pods all nodes hold.
    nodes_with_room: int
    room_for: int
    # [free GPUs, nodes] of the nodes without room for a pod, most free first.
    others: list[tuple[int, int]]
    level: str
    # The most pods one domain of ``level`` holds, and that domain.
    domain_room_for: int
    domain: str
    fits: bool
    fragmented: bool
    message: str

    def as_dict(self) -> dict[str, Any]:
        answer = asdict(self)
        answer["others"] = [list(pair) for pair in self.others]
        return answer


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class Gang:
    """Pods judged together: ``count`` pods asking ``per_pod`` each."""

    count: int
    per_pod: dict[str, int]
    request: TopologyRequest | None


def gangs(pod_sets: Sequence[PodSet]) -> list[Gang]:
    """A job's pod sets as the gangs to judge: those of one shape (the same
    requests per pod and topology request: a PyTorchJob's master and workers)
    as one gang of all their pods, since they need room at the same time;
    except under a required level, where Kueue finds each pod set a domain of
    its own, so each is judged alone."""
    found: list[Gang] = []
    for pod_set in pod_sets:
        request = pod_set.topology_request
        merged = False
        if request is None or not request.required:
            for index, gang in enumerate(found):
                if gang.per_pod == pod_set.requests and gang.request == request:
                    found[index] = Gang(gang.count + pod_set.count, gang.per_pod, request)
                    merged = True
                    break
        if not merged:
            found.append(Gang(pod_set.count, dict(pod_set.requests), request))
    return found


def _nodes(count: int) -> str:
    return f"{count} node" if count == 1 else f"{count} nodes"


def _others(others: list[tuple[int, int]]) -> str:
    parts = [f"{_nodes(nodes)} with {free}" for free, nodes in others if free > 0]
    empty = sum(nodes for free, nodes in others if free <= 0)
    if empty:
        parts.append(f"{_nodes(empty)} with none")
    return ", ".join(parts)


def _level_name(level: str) -> str:
    """``topology.berth.dev/rack`` -> ``rack``: what people call the domain."""
    if level == HOSTNAME:
        return "node"
    return level.rsplit("/", 1)[-1] or level


def fragmentation(
    room: FlavorRoom,
    count: int,
    per_pod: Mapping[str, int],
    request: TopologyRequest | None = None,
) -> Fragmentation | None:
    """The verdict on ``count`` pods asking ``per_pod`` each on this flavor now;
    None when they ask for no GPUs (the map is about GPUs), or for a level the
    flavor's topology lacks (they never fit, and the engine says why)."""
    gpus_per_pod = int(per_pod.get(GPU, 0))
    if gpus_per_pod <= 0 or count <= 0:
        return None
    if request is not None and request.level not in room.levels:
        return None
    held = {node.name: node.pods(per_pod) for node in room.nodes}
    room_for = sum(held.values())
    free_gpus = sum(node.free_gpus for node in room.nodes)
    with_room = sum(1 for pods in held.values() if pods > 0)
    histogram: dict[int, int] = {}
    for node in room.nodes:
        if held[node.name] == 0:
            histogram[node.free_gpus] = histogram.get(node.free_gpus, 0) + 1
    others = sorted(histogram.items(), reverse=True)
    required = request is not None and request.required
    level = request.level if required and request is not None else ANYWHERE
    domain_room, domain, domain_gpus = room_for, room.flavor, free_gpus
    if level != ANYWHERE:
        # The domain with room for the most pods (the first by name among equals).
        domain_room, domain, domain_gpus = -1, "", 0
        for name, members in sorted(room.domains(level).items()):
            pods = sum(held[node.name] for node in members)
            if pods > domain_room:
                domain_room, domain = pods, name
                domain_gpus = sum(node.free_gpus for node in members)
        domain_room = max(domain_room, 0)
    fits = domain_room >= count
    needed = count * gpus_per_pod
    fragmented = not fits and free_gpus >= needed
    verdict = Fragmentation(
        flavor=room.flavor,
        pods=count,
        gpus_per_pod=gpus_per_pod,
        free_gpus=free_gpus,
        nodes_with_room=with_room,
        room_for=room_for,
        others=others,
        level=level,
        domain_room_for=domain_room,
        domain=domain,
        fits=fits,
        fragmented=fragmented,
        message="",
    )
    verdict.message = _message(verdict, needed, domain_gpus)
    return verdict


def _message(verdict: Fragmentation, needed: int, domain_gpus: int) -> str:
    count, gpus = verdict.pods, verdict.gpus_per_pod
    ask = f"needs {_nodes(count)} with {gpus} free GPU{'s' if gpus != 1 else ''} each"
    name = _level_name(verdict.level)
    if verdict.level != ANYWHERE:
        ask += f" in one {name} ({verdict.level})"
    where = f"on flavor {verdict.flavor}"
    if verdict.fits:
        return f"{ask}; {where} there is room for {verdict.domain_room_for} such now"
    if verdict.free_gpus < needed:
        return (
            f"{ask} ({needed} GPUs); only {verdict.free_gpus} GPUs are free {where}, "
            "so it waits for GPUs, not for them to come together"
        )
    if verdict.level != ANYWHERE and verdict.room_for >= count:
        # Room enough on the flavor's nodes, only not in one domain of the level.
        text = (
            f"{ask}; {verdict.free_gpus} GPUs are free {where} and its nodes have room for "
            f"{verdict.room_for} such, but the best {name} ({verdict.domain}) has room for "
            f"only {verdict.domain_room_for}"
        )
        if domain_gpus >= needed:
            text += f" though {domain_gpus} of its GPUs are free"
        return text
    verb = "has" if verdict.nodes_with_room == 1 else "have"
    have = f"only {_nodes(verdict.nodes_with_room)} {verb} {gpus} free"
    if verdict.room_for > verdict.nodes_with_room:
        have += f" (room for {verdict.room_for} of the {count})"
    text = f"{ask}; {verdict.free_gpus} GPUs are free {where} but {have}"
    others = _others(verdict.others)
    if others:
        text += f" (others: {others})"
    return text


rebuilt_by_fields(NodeRoom, FlavorRoom, Gang)
