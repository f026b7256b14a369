"""Capacity planning, the policy and the stream: what "flavor F with N more
(or fewer) GPUs" means to the engine, and how a seed perturbs a workload
stream so that several replays show how sure an answer is.

Kueue admits by quota, not by nodes, so a change of capacity is a change of
nominal quota: the flavor's GPU quota, summed over every ClusterQueue and
cohort that holds some, becomes the new total, shared out pro rata to what
each holds now (largest remainder, whole GPUs); the cpu, memory and other
resources each holder has of the same flavor scale by the same factor, so a
GPU keeps the CPU and memory that come with it. Borrowing limits are kept
(they are absolute); a lending limit above the new nominal quota is cut to
it. A topology-aware flavor (one naming a Kueue Topology, placed node by
node) also gains or loses whole nodes: added nodes copy the last node's
labels (its rack and block) under new host names, removed nodes go from the
end of the list.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from queues.engine.model import (
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    Policy,
    Quota,
    ResourceGroup,
    Workload,
)
from queues.engine.topology import HOSTNAME, ClusterNode

GPU = "nvidia.com/gpu"
# GPUs per node when the flavor's nodes are not known (a flavor judged by quota alone).
DEFAULT_NODE_GPUS = 8


class CapacityError(ValueError):
    """A capacity the policy cannot be given (no quota of the flavor to scale)."""


# ------------------------------------------------------------ the flavor now


def flavor_nodes(policy: Policy, flavor: str) -> list[ClusterNode]:
    """The nodes a topology-aware flavor places pods on (by its node labels);
    empty for a flavor judged by quota alone."""
    found = policy.flavors.get(flavor)
    if found is None or not found.topology_name or found.topology_name not in policy.topologies:
        return []
    return [
        node
        for node in policy.nodes
        if all(node.labels.get(k) == v for k, v in found.node_labels.items())
    ]


def node_gpus(policy: Policy, flavor: str, resource: str = GPU) -> int:
    """GPUs per node of the flavor: the most any of its nodes has, or
    DEFAULT_NODE_GPUS when its nodes are not known."""
    sizes = [node.capacity.get(resource, 0) for node in flavor_nodes(policy, flavor)]
    return max(sizes, default=0) or DEFAULT_NODE_GPUS


def _holders(policy: Policy) -> Iterable[tuple[str, tuple[ResourceGroup, ...]]]:
    for name, queue in sorted(policy.cluster_queues.items()):
        yield f"cq/{name}", queue.resource_groups
    for name, cohort in sorted(policy.cohorts.items()):
        yield f"cohort/{name}", cohort.resource_groups


def holdings(policy: Policy, flavor: str, resource: str = GPU) -> dict[str, int]:
    """Nominal quota of ``flavor`` × ``resource`` per holder (``cq/<name>`` or
    ``cohort/<name>``), for those that list the flavor."""
    held: dict[str, int] = {}
    for holder, groups in _holders(policy):
        for group in groups:
            for quotas in group.flavors:
                if quotas.flavor == flavor and resource in quotas.resources:
                    held[holder] = held.get(holder, 0) + quotas.resources[resource].nominal
    return held


def flavor_capacity(policy: Policy, flavor: str, resource: str = GPU) -> int:
    """The flavor's capacity as Kueue sees it: its nominal quota, in all."""
    return sum(holdings(policy, flavor, resource).values())


def serving(policy: Policy, flavor: str, resource: str = GPU) -> set[str]:
    """The ClusterQueues that may admit work on ``flavor`` (they list it with
    ``resource`` in a resource group: a queue never uses a flavor it does not
    list, however much of it its cohort has)."""
    return {
        name
        for name, queue in policy.cluster_queues.items()
        for group in queue.resource_groups
        for quotas in group.flavors
        if quotas.flavor == flavor and resource in group.covered_resources
    }


def capacity_flavors(policy: Policy, resource: str = GPU) -> list[str]:
    """Flavors with some nominal quota of ``resource``: those a plan can scale."""
    return sorted(f for f in policy.flavors if flavor_capacity(policy, f, resource) > 0)


# ------------------------------------------------------------ a new capacity


def share_out(current: Mapping[str, int], total: int) -> dict[str, int]:
    """``total`` in whole units over the holders in proportion to ``current``
    (largest remainder; ties by name), so the parts add up exactly."""
    before = sum(current.values())
    if before <= 0:
        raise CapacityError("no nominal quota to share out")
    exact = {name: total * amount / before for name, amount in current.items()}
    parts = {name: math.floor(value) for name, value in exact.items()}
    left = total - sum(parts.values())
    for name in sorted(exact, key=lambda n: (-(exact[n] - parts[n]), n))[:left]:
        parts[name] += 1
    return parts


def _scaled_quota(quota: Quota, nominal: int) -> Quota:
    lending = quota.lending_limit
    if lending is not None and lending > nominal:
        lending = nominal
    return Quota(nominal, quota.borrowing_limit, lending)


def _scale_groups(
    groups: tuple[ResourceGroup, ...], flavor: str, resource: str, new: int, old: int
) -> tuple[ResourceGroup, ...]:
    """The holder's groups with ``flavor``'s ``resource`` quota at ``new`` (was
    ``old``) and its other resources of that flavor by the same factor."""
    factor = new / old if old else 0.0
    scaled = []
    for group in groups:
        flavors = []
        for quotas in group.flavors:
            if quotas.flavor != flavor or resource not in quotas.resources:
                flavors.append(quotas)
                continue
            resources = {
                name: _scaled_quota(
                    quota, new if name == resource else math.ceil(quota.nominal * factor)
                )
                for name, quota in quotas.resources.items()
            }
            flavors.append(FlavorQuotas(quotas.flavor, resources))
        scaled.append(ResourceGroup(group.covered_resources, tuple(flavors)))
    return tuple(scaled)


def _nodes_for(policy: Policy, flavor: str, gpus: int, resource: str) -> tuple[ClusterNode, ...]:
    """The cluster's nodes with ``flavor`` holding enough whole nodes for ``gpus``."""
    own = flavor_nodes(policy, flavor)
    if not own:
        return policy.nodes
    size = node_gpus(policy, flavor, resource)
    wanted = max(0, math.ceil(gpus / size))
    kept = [n for n in policy.nodes if n not in own]
    if wanted <= len(own):
        return (*kept, *own[:wanted])
    last = own[-1]
    added = []
    for i in range(wanted - len(own)):
        name = f"{last.name}-plan-{i + 1}"
        labels = {**last.labels}
        if HOSTNAME in labels:
            labels[HOSTNAME] = name
        added.append(ClusterNode(name, labels, dict(last.capacity)))
    return (*kept, *own, *added)


def with_capacity(policy: Policy, flavor: str, gpus: int, resource: str = GPU) -> Policy:
    """The policy with ``flavor``'s capacity (its nominal ``resource`` quota,
    in all) at ``gpus``, shared out pro rata to what each holder has now, and,
    for a topology-aware flavor, the nodes that carry it."""
    current = holdings(policy, flavor, resource)
    if sum(current.values()) <= 0:
        raise CapacityError(f"flavor {flavor!r} has no nominal {resource} quota to scale")
    if gpus < 0:
        raise CapacityError(f"a capacity of {gpus} {resource} is less than none")
    parts = share_out(current, gpus)
    queues: dict[str, ClusterQueue] = {}
    for name, queue in policy.cluster_queues.items():
        key = f"cq/{name}"
        queues[name] = (
            dataclasses.replace(
                queue,
                resource_groups=_scale_groups(
                    queue.resource_groups, flavor, resource, parts[key], current[key]
                ),
            )
            if key in parts
            else queue
        )
    cohorts: dict[str, Cohort] = {}
    for name, cohort in policy.cohorts.items():
        key = f"cohort/{name}"
        cohorts[name] = (
            dataclasses.replace(
                cohort,
                resource_groups=_scale_groups(
                    cohort.resource_groups, flavor, resource, parts[key], current[key]
                ),
            )
            if key in parts
            else cohort
        )
    return dataclasses.replace(
        policy,
        cluster_queues=queues,
        cohorts=cohorts,
        nodes=_nodes_for(policy, flavor, gpus, resource),
    )


# ---------------------------------------------------------------- the seeds


@dataclass(frozen=True)
class Perturbation:
    """How each seed's stream differs from the recorded one: every measured
    workload arrives up to ``jitter`` seconds earlier or later (uniformly) and
    runs its runtime times a lognormal factor of median 1 and shape
    ``runtime_spread``; ``growth`` > 1 adds copies (growth 1.3: each workload
    has a copy with probability 0.3; 2.5: one copy, and a second with
    probability 0.5), each jittered and resampled on its own. Workloads that
    only set the scene (running or queued when a window opened) are kept as
    recorded. The same seed gives the same stream for every capacity, so
    capacities are compared on the same perturbed load."""

    growth: float = 1.0
    jitter: float = 600.0
    runtime_spread: float = 0.2

    @property
    def exact(self) -> bool:
        return self.growth == 1.0 and self.jitter == 0 and self.runtime_spread == 0


def _varied(
    workload: Workload, rng: random.Random, p: Perturbation, horizon: float | None
) -> Workload:
    if p.jitter and math.isfinite(workload.creation_time):
        moved = workload.creation_time + rng.uniform(-p.jitter, p.jitter)
        moved = max(0.0, moved)
        if horizon is not None:
            moved = min(moved, max(0.0, horizon - 1e-3))
        workload.creation_time = moved
    if p.runtime_spread and workload.runtime is not None and math.isfinite(workload.runtime):
        workload.runtime *= rng.lognormvariate(0.0, p.runtime_spread)
    return workload


def perturbed(
    workloads: list[tuple[Workload, str]],
    seed: int,
    perturbation: Perturbation,
    *,
    context: frozenset[str] = frozenset(),
    horizon: float | None = None,
) -> list[tuple[Workload, str]]:
    """Seed ``seed``'s version of a stream (changes the given workloads: pass a
    fresh copy); copies are named ``<name>+<n>``."""
    if perturbation.exact:
        return workloads
    rng = random.Random(f"capacity/{seed}")
    extra = max(0.0, perturbation.growth - 1.0)
    out: list[tuple[Workload, str]] = []
    for workload, label in workloads:
        if workload.key in context:
            out.append((workload, label))
            continue
        copies = math.floor(extra) + (1 if rng.random() < extra - math.floor(extra) else 0)
        originals = [workload.copied() for _ in range(copies)]
        out.append((_varied(workload, rng, perturbation, horizon), label))
        for n, twin in enumerate(originals, start=1):
            twin.name = f"{twin.name}+{n}"
            twin.key = f"{twin.namespace}/{twin.name}"
            out.append((_varied(twin, rng, perturbation, horizon), label))
    return out
