"""What the simulator measures as its clock runs: resource-seconds per
ClusterQueue and flavor × resource (used, borrowed over nominal, lent to
borrowers) and the sampled series the charts draw (usage, borrowing and
pending workloads of the main resource). Kept apart from the event loop in
``queues.engine.simulator``: it only reads the scheduler's tree.

Usage only changes when something is admitted or released, and then in one
cohort tree, so the integrals are kept lazily: each ClusterQueue's rates
(used, over nominal, left idle) hold from its last change to its next, and
the simulator tells the meter which queues the quota tree touched
(``QuotaTree.touched``) once an event time is settled. Lending is shared out
in proportion to idle quota; within a tree and flavor-resource that share is
the same fraction of every lender's idle quota, so its integral is kept once
per tree (``_Pool.accrued``) and each lender's is its idle quota times what
the fraction accrued while that stayed constant. A replay's cost is then per
change, not per event times every queue.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mypy_extensions import mypyc_attr

from queues.engine.model import FlavorResource
from queues.engine.quota import Cell, Node
from queues.engine.scheduler import Scheduler


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class QueueTotals:
    """Integrals over time per flavor × resource: resource-seconds."""

    used: dict[FlavorResource, float] = field(default_factory=dict)
    borrowed: dict[FlavorResource, float] = field(default_factory=dict)
    lent: dict[FlavorResource, float] = field(default_factory=dict)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class QueueRates:
    """What a ClusterQueue uses, borrows over nominal and lends, per second."""

    used: dict[FlavorResource, float] = field(default_factory=dict)
    borrowed: dict[FlavorResource, float] = field(default_factory=dict)
    lent: dict[FlavorResource, float] = field(default_factory=dict)


def extend_totals(totals: QueueTotals, rates: QueueRates, seconds: float) -> None:
    """``seconds`` more at constant ``rates`` (a group idle to the end)."""
    if seconds <= 0:
        return
    for kept, rate in (
        (totals.used, rates.used),
        (totals.borrowed, rates.borrowed),
        (totals.lent, rates.lent),
    ):
        for fr, amount in rate.items():
            kept[fr] = kept.get(fr, 0.0) + amount * seconds


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class _Pool:
    """One cohort tree's lending for one flavor-resource: what its queues borrow
    over nominal, what they leave idle (capped by what they may lend), the
    fraction of idle quota lent (``min(borrowed, idle) / idle``) and its integral
    over time since the replay began."""

    borrowed: int = 0
    idle: int = 0
    fraction: float = 0.0
    accrued: float = 0.0
    # Among the pools an event time's settling changed (``_Tree.refresh``).
    changed: bool = False


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class _Tally:
    """A ClusterQueue's figures for one flavor-resource it has held: its
    quota cell, what it used and held over nominal since the queue's last
    change, and the integrals of both, in fields: settling a queue reads
    and adds to them at every change, where dicts keyed by flavor-resource
    would hash a tuple for each. ``QueueTotals`` are written from them when
    the queue's interval is closed (``UsageMeter._write_totals``)."""

    def __init__(self, cell: Cell) -> None:
        self.cell = cell
        self.fr = cell.fr
        self.used = 0
        self.over = 0
        self.used_total = 0.0
        self.borrowed_total = 0.0
        # Whether it is in its queue's ``using`` and ``borrowing`` yet.
        self.accrued_use = False
        self.accrued_over = False


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class _QueueRates:
    """A ClusterQueue's figures since its last change, and when that was."""

    since: float
    # One for each flavor-resource in its usage, in the usage's order.
    tallies: list[_Tally] = field(default_factory=list)
    # Those that have accrued use, and use over nominal, in the order they
    # first did (the order QueueTotals' keys are written in).
    using: list[_Tally] = field(default_factory=list)
    borrowing: list[_Tally] = field(default_factory=list)
    # Its part in its tree's pools, one per flavor-resource it has quota for
    # (made at its first settling).
    lenders: list[_Lender] = field(default_factory=list)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class _Lender:
    """A ClusterQueue's part in its tree's pool for one flavor-resource, as
    last settled: what it used over nominal, the idle quota it may lend, and
    the pool's ``accrued`` then. Holds the queue's quota cell and the pool,
    read at every settling of the queue without looking either up."""

    def __init__(self, cell: Cell, pool: _Pool) -> None:
        self.cell = cell
        self.pool = pool
        self.borrowing = 0
        self.idle = 0
        self.accrued_mark = 0.0

    def lent_until(self, accrued: float) -> float:
        """What it lent since it was last settled, its pool's lent fraction
        having accrued to ``accrued`` by then (0 when it left nothing idle)."""
        if not self.idle:
            return 0.0
        share = self.idle * (accrued - self.accrued_mark)
        return share if share > 0 else 0.0


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class _Tree:
    """A root (cohort tree or standalone ClusterQueue) and its lending pools."""

    def __init__(self, root: Node, start: float) -> None:
        self.lends = root.is_cohort
        self.since = start
        self.pools: dict[FlavorResource, _Pool] = {}

    def advance(self, now: float) -> None:
        dt = now - self.since
        if dt > 0:
            for pool in self.pools.values():
                if pool.fraction:
                    pool.accrued += pool.fraction * dt
        self.since = now

    def refresh(self, pools: list[_Pool]) -> None:
        for pool in pools:
            pool.fraction = min(pool.borrowed, pool.idle) / pool.idle if pool.idle else 0.0
            pool.changed = False


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class UsageMeter:
    """Integrals and samples for one run, from ``start``; a sample at most every
    ``sample_every`` seconds, of ``main_resource`` (milli-CPU shown as cores).

    The simulator calls ``sample`` before it handles an event time, ``settle``
    once it has (usage is then constant until the next event) and ``close`` at
    the end. ``totals`` has what each queue used and borrowed once its
    interval is closed (``close``, ``close_queues``); ``totals_at`` has the
    figures so far at any time."""

    def __init__(
        self, scheduler: Scheduler, start: float, sample_every: float, main_resource: str
    ) -> None:
        self.scheduler = scheduler
        self.main_resource = main_resource
        self._sample_every = sample_every
        self._start = start
        self._samples_taken = 0
        self.series: dict[str, Any] = {
            "t": [],
            "resource": main_resource,
            "usage": {},
            "pending": {},
            "borrowed": {},
        }
        tree = scheduler.tree
        queues = scheduler.policy.cluster_queues
        self.totals = {name: QueueTotals() for name in queues}
        self.nominal = {
            name: {fr: q.nominal for fr, q in tree.queues[name].quotas.items()} for name in queues
        }
        self._trees = {root.name: _Tree(root, start) for root in tree.roots}
        self._tree_of = {name: self._trees[node.root().name] for name, node in tree.queues.items()}
        self._rates = {name: _QueueRates(start) for name in tree.queues}
        # Usage already in the tree (a scheduler built with workloads) counts from start.
        tree.touched.update(tree.queues)
        self.settle(start, every_touched=True)

    def settle(self, now: float, every_touched: bool = False) -> None:
        """The queues the tree touched since the last call changed at ``now``:
        close their rates' intervals and take their new ones. A queue whose
        usage is back where it was (a preemption search takes victims out and
        puts them back) is left alone unless ``every_touched``: its figures do
        not depend on how the search went about it."""
        touched = self.scheduler.tree.touched
        if not touched:
            return
        queues = self.scheduler.tree.queues
        by_tree: dict[int, tuple[_Tree, list[str]]] = {}
        for name in touched:
            if not every_touched and not self._moved(name, queues[name]):
                continue
            tree = self._tree_of[name]
            by_tree.setdefault(id(tree), (tree, []))[1].append(name)
        touched.clear()
        for tree, names in by_tree.values():
            tree.advance(now)
            # The pools the queues settled here take part in, each once.
            changed: list[_Pool] = []
            for name in names:
                self._settle_queue(name, tree, now, changed)
                if every_touched:  # closing their intervals
                    self._write_totals(name)
            tree.refresh(changed)

    def totals_at(self, now: float) -> dict[str, QueueTotals]:
        """The totals as ``close(now)`` would leave them, leaving the meter as it
        is (a replay's figures so far, while it goes on)."""
        totals: dict[str, QueueTotals] = {}
        for name, kept in self.totals.items():
            rates = self._rates[name]
            tree = self._tree_of[name]
            dt = max(0.0, now - rates.since)
            used = {tally.fr: tally.used_total for tally in rates.using}
            borrowed = {tally.fr: tally.borrowed_total for tally in rates.borrowing}
            lent = dict(kept.lent)
            for tally in rates.tallies:
                if tally.used:
                    fr = tally.fr
                    used[fr] = used.get(fr, 0.0) + tally.used * dt
                    if tally.over:
                        borrowed[fr] = borrowed.get(fr, 0.0) + tally.over * dt
            for lender in rates.lenders:
                pool = lender.pool
                share = lender.lent_until(pool.accrued + pool.fraction * max(0.0, now - tree.since))
                if share > 0:
                    fr = lender.cell.fr
                    lent[fr] = lent.get(fr, 0.0) + share
            totals[name] = QueueTotals(used, borrowed, lent)
        return totals

    def close_queues(self, names: list[str], now: float) -> None:
        """Those queues' intervals closed at ``now`` (their group's last event)."""
        self.scheduler.tree.touched.update(names)
        self.settle(now, every_touched=True)

    def final_rates(self) -> dict[str, QueueRates]:
        """Per queue, what it uses, borrows and lends per second as things stand
        (what its totals grow by while nothing changes)."""
        rates: dict[str, QueueRates] = {}
        for name, kept in self._rates.items():
            lent = {
                lender.cell.fr: lender.idle * lender.pool.fraction
                for lender in kept.lenders
                if lender.idle and lender.pool.fraction
            }
            used: dict[FlavorResource, float] = {t.fr: t.used for t in kept.tallies if t.used}
            over: dict[FlavorResource, float] = {t.fr: t.over for t in kept.tallies if t.over}
            rates[name] = QueueRates(used, over, lent)
        return rates

    def close(self, now: float) -> None:
        """The run ended at ``now``: every interval is closed."""
        self.scheduler.tree.touched.update(self.scheduler.tree.queues)
        self.settle(now, every_touched=True)

    def _moved(self, name: str, node: Node) -> bool:
        """Whether the queue's usage differs from the rates it was last
        settled with. Asked for every queue touched at every event time."""
        tallies = self._rates[name].tallies
        for tally in tallies:
            if tally.cell.used != tally.used:
                return True
        written = node.written
        if len(written) == len(tallies):
            return False
        # Flavor-resources held since: moved unless each is held at 0.
        known = {tally.fr for tally in tallies}
        return any(cell.used for cell in written if cell.fr not in known)

    def _settle_queue(self, name: str, tree: _Tree, now: float, changed: list[_Pool]) -> None:
        rates = self._rates[name]
        tallies = rates.tallies
        dt = now - rates.since
        if dt > 0:
            for tally in tallies:
                used = tally.used
                if not used:
                    continue
                if not tally.accrued_use:  # its first use: its place in the totals
                    tally.accrued_use = True
                    rates.using.append(tally)
                tally.used_total += used * dt
                over = tally.over
                if over:
                    if not tally.accrued_over:
                        tally.accrued_over = True
                        rates.borrowing.append(tally)
                    tally.borrowed_total += over * dt
        rates.since = now
        node = self.scheduler.tree.queues[name]
        written = node.written
        if len(written) != len(tallies):
            known = {tally.fr for tally in tallies}
            tallies.extend(_Tally(cell) for cell in written if cell.fr not in known)
        for tally in tallies:
            cell = tally.cell
            used = cell.used
            tally.used = used
            over = used - cell.nominal
            tally.over = over if over > 0 else 0
        if tree.lends:
            self._settle_lending(node, rates, self.totals[name], tree, changed)

    def _write_totals(self, name: str) -> None:
        """The queue's totals as its tallies have them (its interval closed)."""
        rates, totals = self._rates[name], self.totals[name]
        for tally in rates.using:
            totals.used[tally.fr] = tally.used_total
        for tally in rates.borrowing:
            totals.borrowed[tally.fr] = tally.borrowed_total

    @staticmethod
    def _settle_lending(
        node: Node,
        rates: _QueueRates,
        totals: QueueTotals,
        tree: _Tree,
        changed: list[_Pool],
    ) -> None:
        """Kueue does not say who lent: what borrowers use beyond their nominal
        quota is attributed to the queues leaving quota idle, in proportion."""
        if not rates.lenders:
            for fr in node.quotas:
                pool = tree.pools.get(fr)
                if pool is None:
                    pool = tree.pools[fr] = _Pool()
                rates.lenders.append(_Lender(node.cell(fr), pool))
        for lender in rates.lenders:
            pool, idle = lender.pool, lender.idle
            share = lender.lent_until(pool.accrued)
            if share > 0:
                fr = lender.cell.fr
                totals.lent[fr] = totals.lent.get(fr, 0.0) + share
            cell = lender.cell
            used = cell.used
            nominal = cell.nominal
            over = used - nominal if used > nominal else 0
            spare = max(0, min(nominal - used, cell.lendable)) if nominal > used else 0
            pool.borrowed += over - lender.borrowing
            pool.idle += spare - idle
            lender.borrowing = over
            lender.idle = spare
            lender.accrued_mark = pool.accrued
            if not pool.changed:
                pool.changed = True
                changed.append(pool)

    def sample(self, now: float, force: bool = False) -> None:
        """Called before the events at ``now``: the usage as it stands holds
        since the last event, so it is every sample due by ``now`` (at start,
        start + every, ...: times that do not depend on when events happen, so
        a replay split into groups samples each at the same ones). ``force``
        adds one at ``now`` as things are (the end)."""
        while True:
            due = (
                self._start + self._samples_taken * self._sample_every
                if self._samples_taken
                else self._start
            )
            if due > now:
                break
            self._record(due)
            self._samples_taken += 1
        if force:
            self._record(now)

    def _record(self, at: float) -> None:
        scale = 1000 if self.main_resource == "cpu" else 1  # milli-CPU to cores
        self.series["t"].append(at)
        for name, node in self.scheduler.tree.queues.items():
            used = borrowed = 0
            for cell in node.written:
                fr, amount = cell.fr, cell.used
                if fr[1] == self.main_resource:
                    used += amount
                    borrowed += max(0, amount - node.nominal(fr))
            self.series["usage"].setdefault(name, []).append(used / scale)
            self.series["borrowed"].setdefault(name, []).append(borrowed / scale)
            self.series["pending"].setdefault(name, []).append(len(self.scheduler.queues[name]))
