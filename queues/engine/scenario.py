"""Scenario files: a policy (Kueue-shaped, so a real ``spec`` can be pasted) and a
workload stream (an explicit list and/or generated classes), read from YAML.

Bad input raises ``ScenarioError`` naming the file, the path to the field and
the rule; nothing runs. Field names are Kueue's (camelCase). The policy objects
are read in ``queues.engine.policy_reading``, the workloads in
``queues.engine.workloads``.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from queues.engine.cluster_reading import read_nodes, read_topologies
from queues.engine.configuration import CONFIGURATION_KEYS, read_configuration
from queues.engine.generate import WorkloadClass, parse_generate
from queues.engine.model import Policy, Workload
from queues.engine.policy_reading import (
    check_references,
    implicit_cohorts,
    read_cluster_queues,
    read_cohorts,
    read_flavors,
    read_priority_classes,
    unwrap,
)
from queues.engine.reading import Reader
from queues.engine.workloads import parse_workload
from queues.errors import FieldError


class ScenarioError(Exception):
    """A scenario that cannot run; ``errors`` name each field and rule."""

    def __init__(self, source: str, errors: list[FieldError]) -> None:
        self.source = source
        self.errors = errors
        lines = [f"{source}: {e.field}: {e.message} [{e.rule}]" for e in errors]
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class Timing:
    """How the cluster a scenario stands for runs (its ``simulation:`` block):
    seconds before parked workloads queue again after capacity frees (Kueue's
    batched requeue: a second) and before a preempted workload's quota is free
    (its job stopping; 0 where the evicted quota is released at once, as
    Kueue's own performance runner does)."""

    requeue_delay: float = 1.0
    eviction_delay: float = 30.0


@dataclass
class Scenario:
    policy: Policy
    workloads: list[Workload]
    classes: list[WorkloadClass] = field(default_factory=list)
    priority_classes: dict[str, int] = field(default_factory=dict)
    source: str = "<scenario>"
    timing: Timing = Timing()


TOP_LEVEL = (
    "resourceFlavors",
    "cohorts",
    "clusterQueues",
    "workloadPriorityClasses",
    *CONFIGURATION_KEYS,
    "topologies",
    "nodes",
    "workloads",
    "generate",
    "simulation",
    "description",
    # Scenario tests keep what Kueue does next to the scenario; commands ignore it.
    "rule",
    "cycle",
    "expect",
)


def parse(
    document: Any, source: str = "<scenario>", rng_seed_override: int | None = None
) -> Scenario:
    """A Scenario from parsed YAML; raises ScenarioError listing every problem."""
    reader = Reader()
    top = reader.mapping("", document, TOP_LEVEL)
    flavors = read_flavors(reader, top.get("resourceFlavors"))
    cohorts = read_cohorts(reader, top.get("cohorts"))
    queues = read_cluster_queues(reader, top.get("clusterQueues"))
    priorities = read_priority_classes(reader, top.get("workloadPriorityClasses"))
    configuration = read_configuration(reader, top)
    policy = Policy(
        flavors=flavors,
        cohorts=implicit_cohorts(cohorts, queues),
        cluster_queues=queues,
        fair_sharing=configuration.fair_sharing,
        fair_sharing_strategies=configuration.fair_sharing_strategies,
        wait_for_pods_ready=configuration.wait_for_pods_ready,
        admission_fair_sharing=configuration.admission_fair_sharing,
        topologies=read_topologies(reader, top.get("topologies"), unwrap),
        nodes=read_nodes(reader, top.get("nodes")),
    )
    check_references(reader, policy)
    for i, flavor in enumerate(flavors.values()):
        if flavor.topology_name and flavor.topology_name not in policy.topologies:
            reader.error(
                f"resourceFlavors[{i}].topologyName",
                "unknown-topology",
                f"no topology named {flavor.topology_name!r} in topologies",
            )
    workloads = [
        workload
        for i, entry in enumerate(reader.items("workloads", top.get("workloads")))
        if (workload := parse_workload(reader, f"workloads[{i}]", entry, policy, priorities))
        is not None
    ]
    seen: set[str] = set()
    for i, workload in enumerate(workloads):
        if workload.key in seen:
            reader.error(
                f"workloads[{i}].name", "duplicate", f"workload {workload.key!r} is defined twice"
            )
        seen.add(workload.key)
    classes = parse_generate(reader, top.get("generate"), policy, priorities, rng_seed_override)
    timing = read_timing(reader, top.get("simulation"))
    if reader.errors:
        raise ScenarioError(source, reader.errors)
    return Scenario(
        policy=policy,
        workloads=workloads,
        classes=classes,
        priority_classes=priorities,
        source=source,
        timing=timing,
    )


def read_timing(reader: Reader, value: Any) -> Timing:
    block = reader.mapping("simulation", value, ("requeueDelay", "evictionDelay"))
    default = Timing()
    return Timing(
        requeue_delay=reader.number(
            "simulation.requeueDelay", block.get("requeueDelay"), default.requeue_delay
        )
        or 0.0,
        eviction_delay=reader.number(
            "simulation.evictionDelay", block.get("evictionDelay"), default.eviction_delay
        )
        or 0.0,
    )


def load(path: str | Path, *, seed: int | None = None) -> Scenario:
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(
            source, [FieldError("", "unreadable", exc.strerror or str(exc))]
        ) from exc
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "?"
        raise ScenarioError(source, [FieldError(where, "yaml", str(exc).splitlines()[0])]) from exc
    return parse(document, source, seed)
