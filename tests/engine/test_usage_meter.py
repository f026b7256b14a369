"""The usage meter's integrals depend only on how usage changed over time,
not on searches that take usage out and put it back (no database)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queues.engine.model import ClusterQueue, Cohort, FlavorQuotas, Policy, Quota, ResourceGroup
from queues.engine.scheduler import Scheduler
from queues.engine.usage_meter import QueueTotals, UsageMeter

FR = ("default", "cpu")


def _policy() -> Policy:
    def queue(name: str, nominal: int) -> ClusterQueue:
        group = ResourceGroup(("cpu",), (FlavorQuotas("default", {"cpu": Quota(nominal)}),))
        return ClusterQueue(name, cohort="c", resource_groups=(group,))

    return Policy({}, {"c": Cohort("c")}, {"a": queue("a", 2), "b": queue("b", 4)})


def _totals(probe_at: float | None) -> dict[str, QueueTotals]:
    scheduler = Scheduler(_policy())
    meter = UsageMeter(scheduler, 0.0, 3_600.0, "cpu")
    tree = scheduler.tree
    tree.add("a", {FR: 3})  # one over nominal, borrowed from b's idle quota
    meter.settle(0.1)
    if probe_at is not None:
        # A victim search takes a's usage out to see what would fit, and puts it back.
        tree.remove("a", {FR: 3})
        tree.add("a", {FR: 3})
        meter.settle(probe_at)
    tree.remove("a", {FR: 3})
    meter.settle(1.3)
    meter.close(2.0)
    return meter.totals


def test_usage_taken_out_and_put_back_leaves_the_integrals_exactly_as_they_were() -> None:
    untouched = _totals(None)
    # Split at 0.7 the integral would be 3 * 0.6 + 3 * 0.6 = 3.6, not 3 * 1.2 = 3.5999999999999996.
    assert _totals(0.7) == untouched
    assert untouched["a"].used == {FR: 3 * (1.3 - 0.1)}
    assert untouched["a"].borrowed == {FR: 1 * (1.3 - 0.1)}
    assert untouched["b"].lent == {FR: 1 * (1.3 - 0.1)}


def _lending_policy() -> Policy:
    def queue(name: str, nominal: int, lending: int | None = None) -> ClusterQueue:
        quota = Quota(nominal, lending_limit=lending)
        group = ResourceGroup(("cpu",), (FlavorQuotas("default", {"cpu": quota}),))
        return ClusterQueue(name, cohort="c", resource_groups=(group,))

    return Policy(
        {}, {"c": Cohort("c")}, {"a": queue("a", 2), "b": queue("b", 4), "d": queue("d", 3, 1)}
    )


def _lent_by_hand(
    used: dict[str, int], nominal: dict[str, int], lendable: dict[str, int]
) -> dict[str, float]:
    """Per queue, what it lends per second with ``used``: the borrowers' use
    over nominal, shared out in proportion to the idle quota each may lend."""
    idle = {q: max(0, min(nominal[q] - used[q], lendable[q])) for q in used}
    borrowed = sum(max(0, used[q] - nominal[q]) for q in used)
    pool = sum(idle.values())
    fraction = min(borrowed, pool) / pool if pool else 0.0
    return {q: idle[q] * fraction for q in used}


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 5), st.sampled_from(["a", "b", "d"]), st.integers(-4, 6)),
        max_size=25,
    ),
    st.integers(0, 25),
)
def test_what_each_queue_lent_is_its_share_of_borrowing_over_every_interval(
    steps: list[tuple[int, str, int]], probe: int
) -> None:
    """The meter keeps lending lazily (a pool's accrued fraction, each
    lender's mark); whatever the changes, each queue's ``lent`` is the sum
    over the intervals between them of its idle quota times the fraction of
    idle quota lent then, so far (``totals_at``) and at the end; and what it
    lends per second at the end is that share of the usage left."""
    scheduler = Scheduler(_lending_policy())
    meter = UsageMeter(scheduler, 0.0, 3_600.0, "cpu")
    tree = scheduler.tree
    nominal = {"a": 2, "b": 4, "d": 3}
    lendable = {"a": 2, "b": 4, "d": 1}  # d lends at most 1
    used = dict.fromkeys(nominal, 0)
    expected = dict.fromkeys(nominal, 0.0)
    now = 0.0
    for index, (after, name, change) in enumerate(steps):
        rates = _lent_by_hand(used, nominal, lendable)
        if index == probe:
            half = {q: expected[q] + rates[q] * after / 2 for q in used}
            so_far = meter.totals_at(now + after / 2)
            assert {q: so_far[q].lent.get(FR, 0.0) for q in used} == pytest.approx(half)
        for q in used:
            expected[q] += rates[q] * after
        now += after
        amount = max(change, -used[name])
        if amount > 0:
            tree.add(name, {FR: amount})
        elif amount < 0:
            tree.remove(name, {FR: -amount})
        used[name] += amount
        meter.settle(now)
    final = meter.final_rates()
    rates = _lent_by_hand(used, nominal, lendable)
    assert {q: final[q].lent.get(FR, 0.0) for q in used} == pytest.approx(rates)
    meter.close(now + 7)
    for q in used:
        expected[q] += rates[q] * 7
    assert {q: meter.totals[q].lent.get(FR, 0.0) for q in used} == pytest.approx(expected)
