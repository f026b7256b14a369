"""The fair-share arithmetic (``cluster.fairness_shares``), without a
database: deserved is nominal capped by demand, plus with fair sharing a
weighted water-filled share of what the cohort does not ask for; a window
counts only instants with work waiting; thresholds are fractions."""

from __future__ import annotations

from decimal import Decimal

import pytest

from cluster.fairness_shares import (
    Instant,
    QueueSample,
    deserved_now,
    parse_fraction,
    tally,
    water_fill,
)


def sample(queue: str, nominal: int, held: int, waiting: int, **extra: object) -> QueueSample:
    data: dict[str, object] = {"team": queue, "tree": "shared", "weight": 1.0, **extra}
    return QueueSample(queue=queue, nominal=nominal, held=held, waiting=waiting, **data)  # type: ignore[arg-type]


def test_deserved_is_capped_by_what_the_queue_asks_for() -> None:
    # Nominal 64, asks 8 (holds 2, waits for 6): owed 8, not 64.
    owed = deserved_now([sample("research", 64, 2, 6)], fair_sharing=False)
    assert owed == {"research": 8.0}


def test_without_fair_sharing_a_queue_deserves_only_its_nominal() -> None:
    samples = [sample("research", 16, 16, 16), sample("vision", 16, 0, 0)]
    assert deserved_now(samples, fair_sharing=False) == {"research": 16.0, "vision": 0.0}


def test_with_fair_sharing_the_unasked_quota_goes_to_who_asks_beyond_nominal() -> None:
    # vision asks nothing of its 16; research asks 32: owed its 16 and vision's 16.
    samples = [sample("research", 16, 16, 16), sample("vision", 16, 0, 0)]
    assert deserved_now(samples, fair_sharing=True) == {"research": 32.0, "vision": 0.0}


def test_the_pool_is_split_by_weight_and_what_one_does_not_need_goes_to_the_other() -> None:
    samples = [
        sample("a", 0, 0, 100, weight=3.0),
        sample("b", 0, 0, 100, weight=1.0),
        sample("c", 0, 0, 5, weight=1.0),
        sample("idle", 45, 0, 0),
    ]
    owed = deserved_now(samples, fair_sharing=True)
    # 45 idle: c needs 5 (below its level), a and b share 40 by 3:1.
    assert owed == {"a": 30.0, "b": 10.0, "c": 5.0, "idle": 0.0}


def test_lending_limits_and_other_trees_bound_the_pool() -> None:
    samples = [
        sample("research", 0, 0, 50),
        sample("vision", 40, 0, 0, lending_limit=10),
        sample("elsewhere", 40, 0, 0, tree="other"),
        sample("loner", 40, 0, 0, tree=""),
    ]
    owed = deserved_now(samples, fair_sharing=True, cohort_quota={"shared": 4})
    assert owed["research"] == 14.0  # 10 vision may lend + the cohort's own 4


def test_water_fill_serves_zero_weight_only_from_what_is_left() -> None:
    assert water_fill(10, {"a": 4, "z": 100}, {"a": 1.0, "z": 0.0}) == {"a": 4.0, "z": 6.0}
    assert water_fill(3, {"a": 4, "z": 100}, {"a": 1.0, "z": 0.0}) == {"a": 3.0, "z": 0.0}
    assert water_fill(0, {"a": 4}, {"a": 1.0}) == {"a": 0.0}


def test_a_window_counts_only_instants_with_work_waiting_and_only_inside_it() -> None:
    now = 100_000.0
    instants = [
        # Two hours ago, for an hour: waiting, held 0 of 8 owed.
        Instant(now - 7200, 3600, [sample("research", 16, 0, 8)]),
        # The last hour: nothing waits (held 16): counts for nobody.
        Instant(now - 3600, 1800, [sample("research", 16, 16, 0)]),
        # The last half hour: waits, holds 4 of 12 owed.
        Instant(now - 1800, 1800, [sample("research", 16, 4, 8)]),
    ]
    figures = tally(instants, now=now, fair_sharing=False)["research"]
    hour, day = figures["1h"], figures["24h"]
    assert (hour.received, hour.deserved, hour.waiting) == (4 * 1800, 12 * 1800, 1800)
    assert (day.received, day.deserved, day.waiting) == (4 * 1800, 8 * 3600 + 12 * 1800, 5400)
    assert hour.ratio(3600) == pytest.approx(1 / 3)
    # An instant that began before the window counts only from the window's start.
    late = tally(
        [Instant(now - 4000, 4000, [sample("research", 8, 0, 8)])], now=now, fair_sharing=False
    )
    assert late["research"]["1h"].waiting == 3600


def test_a_ratio_needs_a_tenth_of_the_window_waited_and_something_owed() -> None:
    now = 10_000.0
    short = tally(
        [Instant(now - 300, 300, [sample("research", 8, 0, 8)])], now=now, fair_sharing=False
    )
    assert short["research"]["1h"].ratio(3600) is None  # 5 minutes of an hour
    owed_nothing = tally(
        [Instant(now - 3600, 3600, [sample("research", 0, 0, 8)])], now=now, fair_sharing=False
    )
    assert owed_nothing["research"]["1h"].ratio(3600) is None
    shared = tally(
        [Instant(now - 3600, 3600, [sample("pool", 8, 0, 8, team="")])], now=now, fair_sharing=False
    )
    assert shared == {}  # a shared queue is nobody's


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("0.5", Decimal("0.5")),
        (" 0.25 ", Decimal("0.25")),
        ("1", Decimal("1")),
        ("0.001", Decimal("0.001")),
    ],
)
def test_thresholds_are_fractions(given: str, expected: Decimal) -> None:
    assert parse_fraction(given) == (expected, "")


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("0", "out of range"),
        ("-0.2", "out of range"),
        ("1.5", "out of range"),
        ("NaN", "out of range"),
        ("Infinity", "out of range"),
        ("half", "not a number"),
        ("", "not a number"),
        ("0.1234", "more than 3 decimals"),
        (0.5, "float"),
    ],
)
def test_a_bad_threshold_is_refused_saying_which_rule(given: object, says: str) -> None:
    value, problem = parse_fraction(given)  # type: ignore[arg-type]
    assert value is None and says in problem and "above 0 and at most 1" in problem
