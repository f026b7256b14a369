"""The usage meter's integrals depend only on how usage changed over time,
not on searches that take usage out and put it back (no database)."""

from __future__ import annotations

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
