"""Fair shares, the arithmetic: what each team deserves at one instant, and
how what it received compares over a window. Pure Python (no Django), so the
rules are tested without a database; ``cluster.fairness`` feeds it what sync
recorded. docs/fairness.md explains every choice made here.

- A ClusterQueue deserves its nominal GPUs, and with fair sharing on its
  weighted share of what its cohort tree can lend, never more than it asks
  for (what it holds plus what its pending workloads ask): a queue asking 8
  GPUs is owed 8, not 64.
- What the cohort can lend is the nominal quota its queues do not ask for
  (within their lending limits) plus the cohort's own quota. It goes to the
  queues asking beyond their nominal by weighted water-filling (max-min fair
  by weight, as Kueue's fair sharing tends to): none gets more than it asks,
  and what one does not need goes to the others; weight 0 gets only what the
  weighted ones leave.
- A team's figures add up its queues, at the instants its queues had work
  waiting: received is the GPUs they held, deserved what they were owed,
  both times the time each instant stands for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

# The windows the figures are kept for, by their label (also the metric's
# ``window`` label) and their length in seconds.
WINDOWS: tuple[tuple[str, int], ...] = (("1h", 3600), ("24h", 86400), ("7d", 7 * 86400))
WINDOW_SECONDS = dict(WINDOWS)
# A window's ratio is judged (and exported) only once the team waited at least
# this share of it: a job that waited thirty seconds says nothing about fairness.
MIN_WAITING_SHARE = 0.1
DEFAULT_STARVED_BELOW = Decimal("0.5")
FRACTION_RULE = "a fraction above 0 and at most 1, with up to 3 decimals (e.g. 0.5)"


@dataclass(frozen=True)
class QueueSample:
    """One ClusterQueue at one instant, its GPUs of every flavor together."""

    queue: str
    team: str  # owning team's slug; "" for a shared queue (not counted for anyone)
    tree: str  # root of its cohort tree; "" when it is in no cohort
    weight: float  # its fair-sharing weight
    nominal: int
    held: int  # quota its workloads hold (reserved or admitted)
    waiting: int  # GPUs its pending workloads ask for
    lending_limit: int | None = None  # None: it may lend all its unused quota

    @property
    def demand(self) -> int:
        return self.held + self.waiting

    @property
    def unasked(self) -> int:
        """Nominal quota it does not ask for, as far as it may lend it."""
        spare = max(0, self.nominal - self.demand)
        return spare if self.lending_limit is None else min(spare, self.lending_limit)


def water_fill(
    pool: float, wants: Mapping[str, float], weights: Mapping[str, float]
) -> dict[str, float]:
    """Split ``pool`` among ``wants`` max-min fairly by weight: each gets
    ``min(want, level × weight)`` at the one level that spends the pool (or
    everyone's want, when the pool is larger). Weight 0 (or less) is served,
    equally, only from what the others leave."""
    given = {name: 0.0 for name in wants}
    left = max(0.0, pool)
    for weighted in (True, False):
        open_ = {
            name: (weights.get(name, 1.0) if weighted else 1.0)
            for name, want in wants.items()
            if want > 0 and (weights.get(name, 1.0) > 0) == weighted
        }
        while open_ and left > 1e-9:
            level = left / sum(open_.values())
            # Those whose want is met below this level take their want and leave.
            done = {n for n, w in open_.items() if wants[n] - given[n] <= level * w}
            if not done:
                for name, weight in open_.items():
                    given[name] += level * weight
                left = 0.0
                break
            for name in done:
                left -= wants[name] - given[name]
                given[name] = float(wants[name])
                del open_[name]
    return given


def deserved_now(
    samples: Sequence[QueueSample],
    *,
    fair_sharing: bool,
    cohort_quota: Mapping[str, int] | None = None,
) -> dict[str, float]:
    """GPUs each queue deserves at this instant (its nominal, plus its fair
    share of its cohort tree's lendable GPUs with fair sharing on), capped by
    what it asks for."""
    owed = {s.queue: float(min(s.nominal, s.demand)) for s in samples}
    if not fair_sharing:
        return owed
    trees: dict[str, list[QueueSample]] = {}
    for sample in samples:
        if sample.tree:
            trees.setdefault(sample.tree, []).append(sample)
    for tree, members in trees.items():
        pool = sum(s.unasked for s in members) + (cohort_quota or {}).get(tree, 0)
        wants = {s.queue: float(max(0, s.demand - s.nominal)) for s in members}
        shares = water_fill(pool, wants, {s.queue: s.weight for s in members})
        for sample in members:
            owed[sample.queue] += shares[sample.queue]
    return owed


@dataclass
class Tally:
    """One team's figures over one window."""

    received: float = 0.0  # GPU-seconds held while it had work waiting
    deserved: float = 0.0  # GPU-seconds it was owed then
    waiting: float = 0.0  # seconds it had work waiting

    def ratio(self, window_seconds: int) -> float | None:
        """Received over deserved; None when it was owed nothing or waited too
        little of the window to judge."""
        if self.deserved <= 0 or self.waiting < MIN_WAITING_SHARE * window_seconds:
            return None
        return self.received / self.deserved


@dataclass
class Instant:
    """The queues at one sampled instant, and the seconds it stands for,
    ending at ``at + seconds``."""

    at: float  # epoch seconds
    seconds: float
    samples: list[QueueSample] = field(default_factory=list)


def tally(
    instants: Iterable[Instant],
    *,
    now: float,
    fair_sharing: bool,
    cohort_quota: Mapping[str, int] | None = None,
) -> dict[str, dict[str, Tally]]:
    """{team: {window: Tally}} over every window ending at ``now``; only the
    part of an instant's stretch inside a window counts in it."""
    result: dict[str, dict[str, Tally]] = {}
    for instant in instants:
        owed = deserved_now(instant.samples, fair_sharing=fair_sharing, cohort_quota=cohort_quota)
        teams: dict[str, list[QueueSample]] = {}
        for sample in instant.samples:
            if sample.team:
                teams.setdefault(sample.team, []).append(sample)
        for team, queues in teams.items():
            windows = result.setdefault(team, {label: Tally() for label, _ in WINDOWS})
            if sum(q.waiting for q in queues) <= 0:
                continue
            held = sum(q.held for q in queues)
            deserved = sum(owed[q.queue] for q in queues)
            end = min(now, instant.at + instant.seconds)
            for label, length in WINDOWS:
                seconds = end - max(instant.at, now - length)
                if seconds <= 0:
                    continue
                figures = windows[label]
                figures.received += held * seconds
                figures.deserved += deserved * seconds
                figures.waiting += seconds
    return result


def parse_fraction(text: str | Decimal | float | None) -> tuple[Decimal | None, str]:
    """A starvation threshold: (the fraction, "") or (None, what is wrong, by
    ``FRACTION_RULE``). Given as text (a setting, a form) or a number."""
    if isinstance(text, float):
        return None, f"{text!r} is a float; give it as text or a decimal: {FRACTION_RULE}"
    try:
        value = Decimal(str(text).strip())
    except (InvalidOperation, ValueError):
        return None, f"{text!r} is not a number: {FRACTION_RULE}"
    if not value.is_finite() or value <= 0 or value > 1:
        return None, f"{text!r} is out of range: {FRACTION_RULE}"
    exponent = value.as_tuple().exponent
    if isinstance(exponent, int) and exponent < -3:
        return None, f"{text!r} has more than 3 decimals: {FRACTION_RULE}"
    return value.quantize(Decimal("0.001")).normalize(), ""
