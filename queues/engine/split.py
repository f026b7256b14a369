"""A replay split into its independent groups (``queues.engine.groups``):
each group replayed on its own, under the part of the policy it uses and with
the workloads of its queues, then merged into one result. The simulator runs
a group's cycles only when something happened in it, so the merged result is
the whole replay's (``tests/engine/test_split.py`` checks this on random
policies): groups can be replayed one after another, or apart.

Every group is given the whole replay's frame: when it starts, how often the
charts sample and which resource they follow. A group over before the others
is extended to the end of the whole replay as it was left (its final usage
rates, its last samples), as the whole replay measures it.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from queues.engine.groups import independent_groups
from queues.engine.model import Policy, Workload
from queues.engine.replay_records import SimulationResult, frame_of
from queues.engine.simulator import Simulator
from queues.engine.usage_meter import extend_totals


def part_of_policy(policy: Policy, queues: set[str]) -> Policy:
    """The policy cut down to some ClusterQueues and the cohorts of their
    trees (flavors, topologies and nodes as they are)."""

    def root(name: str) -> str:
        while (parent := policy.cohorts[name].parent) is not None and parent in policy.cohorts:
            name = parent
        return name

    roots = {
        root(q.cohort)
        for name, q in policy.cluster_queues.items()
        if name in queues and q.cohort is not None and q.cohort in policy.cohorts
    }
    return dataclasses.replace(
        policy,
        cluster_queues={n: q for n, q in policy.cluster_queues.items() if n in queues},
        cohorts={n: c for n, c in policy.cohorts.items() if root(n) in roots},
    )


def groups_of_stream(
    policy: Policy, workloads: Iterable[tuple[Workload, str]]
) -> dict[str, list[tuple[Workload, str]]]:
    """The stream's workloads by group; every group present, even with none."""
    group_of = independent_groups(policy)
    parts: dict[str, list[tuple[Workload, str]]] = {g: [] for g in sorted(set(group_of.values()))}
    for workload, workload_class in workloads:
        parts[group_of[workload.cluster_queue]].append((workload, workload_class))
    return parts


# The per-ClusterQueue charts of a result's ``series``.
SERIES_KINDS = ("usage", "pending", "borrowed")


@dataclass
class GroupReplay:
    """One group's replay, not started: the part of the policy it uses, its
    workloads and the simulator's options (the whole replay's frame among
    them). Plain data, so it can be sent to another process."""

    policy: Policy
    workloads: list[tuple[Workload, str]]
    options: dict[str, Any]

    def simulator(self) -> Simulator:
        return Simulator(self.policy, self.workloads, **self.options)

    def take_simulator(self) -> Simulator:
        """The simulator, which takes the workloads: this replay is spent
        (its list emptied), so that each workload is let go once it has
        finished, as in a replay in one process."""
        simulator = self.simulator()
        self.workloads = []
        return simulator


def group_replays(
    policy: Policy,
    workloads: Iterable[tuple[Workload, str]],
    *,
    start: float | None = None,
    horizon: float | None = None,
    samples: int = 240,
    context: Iterable[str] = (),
    **options: Any,
) -> dict[str, GroupReplay]:
    """Each group's replay, framed as the whole replay, by group name."""
    stream = list(workloads)
    frame = frame_of((w for w, _ in stream), start=start, horizon=horizon, samples=samples)
    group_of = independent_groups(policy)
    measured_apart = set(context)
    replays: dict[str, GroupReplay] = {}
    for group, part in groups_of_stream(policy, stream).items():
        queues = {name for name, g in group_of.items() if g == group}
        replays[group] = GroupReplay(
            part_of_policy(policy, queues),
            part,
            {
                **options,
                "start": frame.start,
                "horizon": horizon,
                "context": {w.key for w, _ in part} & measured_apart,
                "sample_every": frame.sample_every,
                "main_resource": frame.main_resource,
            },
        )
    return replays


def group_simulators(
    policy: Policy, workloads: Iterable[tuple[Workload, str]], **options: Any
) -> dict[str, Simulator]:
    """A simulator per group, each framed as the whole replay, by group name
    (``group_replays``' arguments)."""
    return {g: r.simulator() for g, r in group_replays(policy, workloads, **options).items()}


def merge(results: Mapping[str, SimulationResult]) -> SimulationResult:
    """One result from the groups' (each measured to the same end), as the
    whole replay gives it."""
    ordered = [results[group] for group in sorted(results)]
    first = ordered[0]
    end = max(r.end for r in ordered)
    longest = max(ordered, key=lambda r: r.end)
    times = longest.series["t"]
    series: dict[str, Any] = {"t": times, "resource": first.series["resource"]}
    for kind in SERIES_KINDS:
        series[kind] = {}
    for result in ordered:
        # A group over before the end stays as it was left, at every later sample.
        missing = len(times) - len(result.series["t"])
        for kind in SERIES_KINDS:
            for name, values in result.series[kind].items():
                series[kind][name] = values + [values[-1]] * missing
        if result.end < end:
            for name, totals in result.totals.items():
                extend_totals(totals, result.final_rates[name], end - result.end)
    log = [entry for result in ordered for entry in result.admission_log]
    log.sort(key=lambda entry: entry[1])  # stable: a time's admissions by group name
    by_reason: dict[str, int] = {}
    for result in ordered:
        for reason, count in result.preemptions_by_reason.items():
            by_reason[reason] = by_reason.get(reason, 0) + count
    return SimulationResult(
        start=first.start,
        end=end,
        records={k: r for result in ordered for k, r in result.records.items()},
        totals={k: t for result in ordered for k, t in result.totals.items()},
        nominal={k: n for result in ordered for k, n in result.nominal.items()},
        preemptions_by_reason=by_reason,
        preemptions_by_queue={
            k: p for result in ordered for k, p in result.preemptions_by_queue.items()
        },
        series=series,
        cycles=sum(r.cycles for r in ordered),
        admissions=sum(r.admissions for r in ordered),
        livelocks=sum(r.livelocks for r in ordered),
        horizon=first.horizon,
        admission_log=log,
        final_rates={k: f for result in ordered for k, f in result.final_rates.items()},
    )


def replay_split(
    policy: Policy, workloads: Iterable[tuple[Workload, str]], **options: Any
) -> SimulationResult:
    """The whole replay, group after group, merged (``Simulator`` options)."""
    simulators = group_simulators(policy, workloads, **options)
    return merge({group: s.run() for group, s in simulators.items()})
