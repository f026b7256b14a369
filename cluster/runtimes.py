"""How long work runs on this cluster, from what sync recorded: the range a
workload with no declared runtime plausibly runs for, for start estimates.

Kept per queue class (the LocalQueue a job was sent to) and per ClusterQueue,
from the workloads that finished in the last week and those running now: a
workload is judged by the narrowest group with enough samples, else by all of
them. A running workload's runtime is only known to be longer than what it
has run so far (right-censored), so the distribution is the Kaplan-Meier
estimate: leaving running work out would keep only the short runs and promise
starts too early. A workload still running has outlived part of the
distribution: its range is drawn from the runs that lasted longer than it has
run so far.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import DurationField, ExpressionWrapper, F

from cluster.models import WorkloadRecord, WorkloadState

WINDOW = timedelta(days=7)
# The most recent finishes read at all (the groups fill from them).
RECENT = 20000
# Per group, the most recent runs kept: enough for stable quantiles.
SAMPLES = 2000
# Fewer samples than this and a group borrows the wider group's distribution.
ENOUGH = 10
# The range a workload's runtime is drawn from: these quantiles of its group.
SHORT, LONG = 0.1, 0.9

# (seconds it ran, whether it finished: False for one still running)
Run = tuple[float, bool]


def quantile(runs: list[Run], q: float, after: float = 0.0) -> float | None:
    """The ``q`` quantile of the runtime of work that ran longer than
    ``after``, by Kaplan-Meier over ``runs`` (sorted); None when the runs
    still going leave it unknown (fewer than 1 - q of them could end sooner)."""
    at_risk = [run for run in runs if run[0] > after]
    remaining = len(at_risk)
    survival = 1.0
    index = 0
    while index < len(at_risk):
        moment = at_risk[index][0]
        ended = censored = 0
        while index < len(at_risk) and at_risk[index][0] == moment:
            if at_risk[index][1]:
                ended += 1
            else:
                censored += 1
            index += 1
        if ended:
            survival *= 1 - ended / remaining
            if 1 - survival >= q - 1e-12:
                return moment
        remaining -= ended + censored
    return None


@dataclass
class Runtimes:
    """Recorded runs (wall seconds, sorted), by queue class and ClusterQueue."""

    by_class: dict[str, list[Run]] = field(default_factory=dict)
    by_queue: dict[str, list[Run]] = field(default_factory=dict)
    everything: list[Run] = field(default_factory=list)

    def _group(self, queue_class: str, cluster_queue: str) -> list[Run]:
        for group in (self.by_class.get(queue_class), self.by_queue.get(cluster_queue)):
            if group is not None and sum(1 for _, ended in group if ended) >= ENOUGH:
                return group
        return self.everything if sum(1 for _, e in self.everything if e) >= ENOUGH else []

    def range_for(
        self, queue_class: str, cluster_queue: str, ran: float = 0.0
    ) -> tuple[float, float] | None:
        """(short, long) total runtime for a workload that has run ``ran``
        seconds so far; None when nothing similar was recorded. Where the
        record cannot say (everything similar outlived it, or too much of it
        still runs), the long end is twice the longest seen."""
        group = self._group(queue_class, cluster_queue)
        if not group:
            return None
        longest = max(ran, group[-1][0])
        short = quantile(group, SHORT, after=ran)
        long = quantile(group, LONG, after=ran)
        if short is None:
            return (longest, 2 * longest) if longest > 0 else None
        return (short, long if long is not None else 2 * longest)


def recorded_runtimes(now: datetime) -> Runtimes:
    """The runs that finished in the week before ``now``, and those running."""
    finished = (
        WorkloadRecord.objects.filter(
            state=WorkloadState.FINISHED,
            finished_at__gte=now - WINDOW,
            admitted_at__isnull=False,
        )
        .annotate(ran=ExpressionWrapper(F("finished_at") - F("admitted_at"), DurationField()))
        .order_by("-finished_at")
        .values_list("local_queue", "cluster_queue", "ran")
    )
    running = WorkloadRecord.objects.filter(
        state=WorkloadState.ADMITTED, admitted_at__isnull=False, admitted_at__lte=now
    ).values_list("local_queue", "cluster_queue", "admitted_at")
    found = Runtimes()

    def add(local_queue: str, cluster_queue: str, run: Run) -> None:
        for groups, key in ((found.by_class, local_queue), (found.by_queue, cluster_queue)):
            if key and len(groups.setdefault(key, [])) < SAMPLES:
                groups[key].append(run)
        if len(found.everything) < SAMPLES:
            found.everything.append(run)

    for local_queue, cluster_queue, ran in finished[:RECENT].iterator(chunk_size=2000):
        add(local_queue, cluster_queue, (max(0.0, ran.total_seconds()), True))
    for local_queue, cluster_queue, admitted in running[:RECENT].iterator(chunk_size=2000):
        if admitted is None:
            continue
        add(local_queue, cluster_queue, (max(0.0, (now - admitted).total_seconds()), False))
    for group in _groups(found):
        group.sort()
    return found


def _groups(found: Runtimes) -> Iterable[list[Run]]:
    yield from found.by_class.values()
    yield from found.by_queue.values()
    yield found.everything
