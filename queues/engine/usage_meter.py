"""What the simulator measures as its clock runs: resource-seconds per
ClusterQueue and flavor × resource (used, borrowed over nominal, lent to
borrowers) and the sampled series the charts draw (usage, borrowing and
pending workloads of the main resource). Kept apart from the event loop in
``queues.engine.simulator``: it only reads the scheduler's tree, at each event.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from queues.engine.model import FlavorResource
from queues.engine.quota import Node
from queues.engine.scheduler import Scheduler


@dataclass
class QueueTotals:
    """Integrals over time per flavor × resource: resource-seconds."""

    used: dict[FlavorResource, float] = field(default_factory=dict)
    borrowed: dict[FlavorResource, float] = field(default_factory=dict)
    lent: dict[FlavorResource, float] = field(default_factory=dict)


class UsageMeter:
    """Integrals and samples for one run, from ``start``; a sample at most every
    ``sample_every`` seconds, of ``main_resource`` (milli-CPU shown as cores)."""

    def __init__(
        self, scheduler: Scheduler, start: float, sample_every: float, main_resource: str
    ) -> None:
        self.scheduler = scheduler
        self.main_resource = main_resource
        self._sample_every = sample_every
        self._next_sample = start
        self.series: dict[str, Any] = {
            "t": [],
            "resource": main_resource,
            "usage": {},
            "pending": {},
            "borrowed": {},
        }
        queues = scheduler.policy.cluster_queues
        self.totals = {name: QueueTotals() for name in queues}
        self.nominal = {
            name: {fr: q.nominal for fr, q in scheduler.tree.queues[name].quotas.items()}
            for name in queues
        }
        self._last_integral = start

    def integrate(self, now: float) -> None:
        """Accumulate resource-seconds since the last event, and sample."""
        dt = now - self._last_integral
        if dt > 0:
            tree = self.scheduler.tree
            for name, node in tree.queues.items():
                totals = self.totals[name]
                for fr, used in node.usage.items():
                    if not used:
                        continue
                    totals.used[fr] = totals.used.get(fr, 0.0) + used * dt
                    over = used - node.nominal(fr)
                    if over > 0:
                        totals.borrowed[fr] = totals.borrowed.get(fr, 0.0) + over * dt
            for root in tree.roots:
                if root.is_cohort:
                    self._integrate_lending(root, dt)
            self._last_integral = now
        self.sample(now)

    def _integrate_lending(self, root: Node, dt: float) -> None:
        """Attribute what borrowers use to the queues with unused quota, in
        proportion to how much each leaves unused (Kueue does not say who lent)."""
        queues = list(root.queues())
        borrowed: dict[FlavorResource, int] = {}
        idle: dict[FlavorResource, dict[str, int]] = {}
        for node in queues:
            for fr in node.quotas:
                used = node.usage.get(fr, 0)
                nominal = node.nominal(fr)
                if used > nominal:
                    borrowed[fr] = borrowed.get(fr, 0) + used - nominal
                elif nominal > used:
                    spare = min(nominal - used, node.lendable(fr))
                    if spare > 0:
                        idle.setdefault(fr, {})[node.name] = spare
        for fr, amount in borrowed.items():
            lenders = idle.get(fr, {})
            total = sum(lenders.values())
            if not total:
                continue
            for name, spare in lenders.items():
                share = min(amount, total) * spare / total
                lent = self.totals[name].lent
                lent[fr] = lent.get(fr, 0.0) + share * dt

    def sample(self, now: float, force: bool = False) -> None:
        if now < self._next_sample and not force:
            return
        self._next_sample = now + self._sample_every
        scale = 1000 if self.main_resource == "cpu" else 1  # milli-CPU to cores
        self.series["t"].append(now)
        for name, node in self.scheduler.tree.queues.items():
            used = borrowed = 0
            for fr, amount in node.usage.items():
                if fr[1] == self.main_resource:
                    used += amount
                    borrowed += max(0, amount - node.nominal(fr))
            self.series["usage"].setdefault(name, []).append(used / scale)
            self.series["borrowed"].setdefault(name, []).append(borrowed / scale)
            self.series["pending"].setdefault(name, []).append(len(self.scheduler.queues[name]))
