"""The quota tree's arithmetic, pinned on Kueue's worked examples (no database)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queues.engine import model
from queues.engine.model import (
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    Policy,
    Quota,
    ResourceGroup,
    flavor_resource,
)
from queues.engine.quota import UNBOUNDED, QuotaTree
from queues.engine.victim_search import usage_along, used_no_less

FR = ("default", "cpu")


def queue(
    name: str,
    cohort: str | None,
    nominal: int,
    *,
    borrowing: int | None = None,
    lending: int | None = None,
) -> ClusterQueue:
    group = ResourceGroup(
        ("cpu",), (FlavorQuotas("default", {"cpu": Quota(nominal, borrowing, lending)}),)
    )
    return ClusterQueue(name, cohort=cohort, resource_groups=(group,))


def tree(*queues: ClusterQueue, cohorts: tuple[Cohort, ...] = (Cohort("c"),)) -> QuotaTree:
    return QuotaTree(Policy({}, {c.name: c for c in cohorts}, {q.name: q for q in queues}))


def test_each_flavor_resource_pair_is_one_tuple_the_tree_is_keyed_by() -> None:
    # Dicts keyed by flavor-resources then find their keys by identity.
    pair = flavor_resource("default", "cpu")
    assert pair == FR
    assert flavor_resource("default", "".join(["c", "pu"])) is pair
    assert flavor_resource("other", "cpu") is not pair
    t = tree(queue("a", "c", 10))
    assert next(iter(t.queues["a"].quotas)) is pair
    # The first call for a pair returns the tuple it keeps, too (compiled, a
    # tuple display assigned twice is packed once for each target).
    first = flavor_resource("asked-once", "nvidia.com/gpu")
    assert flavor_resource("asked-once", "nvidia.com/gpu") is first


def test_the_flavor_resource_table_starts_again_past_its_bound() -> None:
    # Names from unbounded input keep it small; an equal tuple is still found.
    pair = flavor_resource("many", "r0")
    for i in range(1, 300):
        flavor_resource("many", f"r{i}")
    assert flavor_resource("many", "r0") == pair
    assert len(model._FLAVOR_RESOURCES["many"]) <= model._RESOURCES_KEPT


def test_lending_limit_keeps_quota_and_usage_bubbles_past_it() -> None:
    # Kueue's example: A nominal 10 lending 4 (keeps 6), B nominal 5, cohort pool 4 + 5 = 9.
    t = tree(queue("a", "c", 10, lending=4), queue("b", "c", 5))
    a, b, c = t.queues["a"], t.queues["b"], t.cohorts["c"]
    assert (a.local_quota(FR), b.local_quota(FR), c.subtree[FR]) == (6, 0, 9)
    assert (a.available(FR), b.available(FR)) == (15, 9)
    assert (a.potential_available(FR), b.potential_available(FR)) == (15, 9)
    t.add("a", {FR: 8})
    assert c.usage[FR] == 2  # 8 used, 6 kept locally: 2 comes from the pool
    assert (a.available(FR), b.available(FR)) == (7, 7)
    t.remove("a", {FR: 8})
    assert (a.usage[FR], c.usage[FR]) == (0, 0)


def test_borrowing_limit_caps_what_comes_from_the_parent() -> None:
    t = tree(queue("a", "c", 10, lending=4), queue("b", "c", 5, borrowing=1))
    t.add("a", {FR: 8})
    assert t.queues["b"].available(FR) == 6  # its own 5 plus at most 1 borrowed
    assert t.queues["b"].potential_available(FR) == 6


def test_hierarchical_cohort_with_own_quota() -> None:
    inner = Cohort(
        "inner",
        parent="outer",
        resource_groups=(ResourceGroup(("cpu",), (FlavorQuotas("default", {"cpu": Quota(4)}),)),),
    )
    t = tree(queue("a", "inner", 2), queue("b", "outer", 3), cohorts=(Cohort("outer"), inner))
    assert t.cohorts["inner"].subtree[FR] == 6
    assert t.cohorts["outer"].subtree[FR] == 9
    assert t.queues["a"].available(FR) == 9
    assert t.cohorts["outer"].height == 2 and t.cohorts["inner"].height == 1


def test_borrowing_level_counts_how_far_up_the_quota_comes_from() -> None:
    inner = Cohort("inner", parent="outer")
    t = tree(
        queue("a", "inner", 2),
        queue("sib", "inner", 2),
        queue("far", "outer", 10),
        cohorts=(Cohort("outer"), inner),
    )
    a = t.queues["a"]
    assert a.borrowing_level(FR, 2) == (0, True)  # within nominal
    # The inner cohort holds it, and the outer one could be reclaimed from.
    assert a.borrowing_level(FR, 4) == (1, True)
    # It needs the outer cohort, the root: nothing above it to reclaim from,
    # whether or not even the root holds it.
    assert a.borrowing_level(FR, 10) == (2, False)
    assert a.borrowing_level(FR, 100) == (2, False)
    assert t.cohorts["outer"].borrowing_level(FR, 1) == (0, False)  # the root itself


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "d"]), st.integers(1, 7), st.booleans()),
        max_size=40,
    )
)
def test_within_nominal_follows_usage_through_adds_and_removes(
    steps: list[tuple[str, int, bool]],
) -> None:
    """``Node.within_nominal`` reads a set kept up to date as usage changes; it
    must say what usage against the subtree quota says, at every node, after
    any sequence of adds and removes (a lending limit stops usage on the way up).
    Each node's usage is kept once, in its cells; ``Node.used`` and
    ``Node.usage`` read them and agree throughout."""
    inner = Cohort(
        "inner",
        parent="outer",
        resource_groups=(ResourceGroup(("cpu",), (FlavorQuotas("default", {"cpu": Quota(2)}),)),),
    )
    t = tree(
        queue("a", "inner", 4, lending=2),
        queue("b", "inner", 3),
        queue("d", "outer", 5, borrowing=4),
        cohorts=(Cohort("outer"), inner),
    )
    held: dict[str, list[int]] = {"a": [], "b": [], "d": []}
    nodes = [*t.queues.values(), *t.cohorts.values()]
    for name, amount, adding in steps:
        if adding or not held[name]:
            t.add(name, {FR: amount})
            held[name].append(amount)
        else:
            t.remove(name, {FR: held[name].pop()})
        for node in nodes:
            # The usage the rest of the engine reads is the cell's, the one
            # the quota checks read.
            assert node.cell(FR).used == node.used(FR) == node.usage.get(FR, 0), node
            expected = node.usage.get(FR, 0) <= node.subtree.get(FR, 0)
            assert node.within_nominal({FR}) is expected, (node, node.usage, node.subtree)
            assert node.within_nominal(set()) is True


# A queue "a" and another in cohort "c", and what each holds.
A_QUEUE_BESIDE_ANOTHER = {
    "nominal": st.integers(0, 8),
    "borrowing": st.none() | st.integers(0, 6),
    "lending": st.none() | st.integers(0, 8),
    "other": st.integers(0, 8),
    "own": st.integers(0, 16),
    "elsewhere": st.integers(0, 20),
}


@settings(max_examples=300, deadline=None)
@given(**A_QUEUE_BESIDE_ANOTHER)
def test_a_queues_room_stays_as_it_is_over_its_steady_range(
    nominal: int, borrowing: int | None, lending: int | None, other: int, own: int, elsewhere: int
) -> None:
    """Over the range of its cohort's usage ``steady_between`` gives, a
    queue's room (``available``, from 0 up) is what it is now, for every
    usage elsewhere in the cohort; and a queue at its borrowing limit, or
    with nothing left, has such a range."""
    t = tree(queue("a", "c", nominal, borrowing=borrowing, lending=lending), queue("b", "c", other))
    a, cohort = t.queues["a"], t.cohorts["c"]
    t.add("a", {FR: own})
    t.add("b", {FR: elsewhere})
    room = max(0, a.available(FR))
    steady = a.steady_between(FR)
    if room == 0:
        assert steady is not None
    if steady is None:
        return
    lo, hi = steady
    assert lo <= cohort.usage.get(FR, 0) <= hi
    t.remove("b", {FR: elsewhere})
    for moved in range(0, 40):
        t.add("b", {FR: moved})
        used = cohort.usage.get(FR, 0)
        if lo <= used <= hi:
            assert max(0, a.available(FR)) == room, (moved, used, steady)
        t.remove("b", {FR: moved})


@settings(max_examples=300, deadline=None)
@given(**A_QUEUE_BESIDE_ANOTHER, amount=st.integers(0, 24))
def test_whether_a_request_fits_holds_over_its_range_and_changes_past_it(
    nominal: int,
    borrowing: int | None,
    lending: int | None,
    other: int,
    own: int,
    elsewhere: int,
    amount: int,
) -> None:
    """Over the range of its cohort's usage ``fits_between`` gives, whether
    ``amount`` fits in a queue's room (``available``, from 0 up) is what it
    was when read, for every usage elsewhere in the cohort; just past a
    bounded end it is not."""
    t = tree(queue("a", "c", nominal, borrowing=borrowing, lending=lending), queue("b", "c", other))
    a, cohort = t.queues["a"], t.cohorts["c"]
    t.add("a", {FR: own})
    t.add("b", {FR: elsewhere})
    fits = amount <= max(0, a.available(FR))
    lo, hi = a.cell(FR).fits_between(amount, fits)
    assert lo <= cohort.usage.get(FR, 0) <= hi
    t.remove("b", {FR: elsewhere})
    for moved in range(0, 60):
        t.add("b", {FR: moved})
        used = cohort.usage.get(FR, 0)
        now = amount <= max(0, a.available(FR))
        if lo <= used <= hi:
            assert now is fits, (moved, used, (lo, hi))
        elif used in (lo - 1, hi + 1):
            assert now is not fits, (moved, used, (lo, hi))
        t.remove("b", {FR: moved})


def test_a_request_that_cannot_fit_at_any_cohort_usage_has_no_ends() -> None:
    t = tree(queue("a", "c", 4, borrowing=2), queue("b", "c", 10))
    t.add("a", {FR: 6})  # all it may hold: 4 of its own and 2 borrowed
    a = t.queues["a"].cell(FR)
    unbounded = (-UNBOUNDED, UNBOUNDED)
    assert a.fits_between(1, False) == unbounded  # its limit leaves it nothing
    b = t.queues["b"].cell(FR)
    assert b.fits_between(15, False) == unbounded  # more than the cohort holds
    assert a.fits_between(0, True) == unbounded  # asks nothing
    t.remove("a", {FR: 6})
    assert a.fits_between(3, True) == (-UNBOUNDED, 11)  # 14 in the cohort, 3 left


def test_whether_a_request_fits_is_worked_out_only_right_below_a_root() -> None:
    t = tree(
        queue("a", "team", 4),
        cohorts=(Cohort("org"), Cohort("team", parent="org")),
    )
    with pytest.raises(ValueError, match="a: fits_between is for a node right below a root"):
        t.queues["a"].cell(FR).fits_between(2, True)


def test_a_queue_at_its_borrowing_limit_is_steady_whatever_its_cohort_uses() -> None:
    t = tree(queue("a", "c", 4, borrowing=2), queue("b", "c", 10))
    t.add("a", {FR: 6})  # all it may hold: 4 of its own and 2 borrowed
    t.add("b", {FR: 3})
    assert t.queues["a"].available(FR) == 0
    lo, hi = t.queues["a"].steady_between(FR) or (None, None)
    assert lo is not None and hi is not None and lo <= 0 and hi >= 14
    # Below a root only: a cohort's own room, or a queue's deeper down, is not worked out.
    assert t.cohorts["c"].steady_between(FR) is None


def test_usage_read_along_another_tree_is_said_so_either_way() -> None:
    """``used_no_less`` compares figures ``usage_along`` read: too few (the
    tree deeper than when read) or too many are a ValueError naming the
    queue and the counts, not an IndexError or a silent answer."""
    t = tree(queue("a", "c", 10), queue("b", "c", 5))
    node = t.queues["a"]
    read = usage_along(node, {FR: 4})
    assert read == (0, 0)
    assert used_no_less(node, {FR: 4}, read)
    t.add("b", {FR: 3})
    assert used_no_less(node, {FR: 4}, read)
    assert not used_no_less(node, {FR: 4}, (1, 0))
    for wrong in ((0,), (0, 0, 0)):
        with pytest.raises(ValueError, match=r"a: \d usage figures read for 2 level\(s\) × 1"):
            used_no_less(node, {FR: 4}, wrong)


FR2 = ("default", "memory")


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 6), st.integers(0, 6)), max_size=6),
    st.lists(st.integers(0, 12), min_size=4, max_size=4),
)
def test_used_no_less_is_every_figure_along_the_tree_at_least_the_one_read(
    admitted: list[tuple[str, int, int]], read: list[int]
) -> None:
    """Two flavor-resources, a queue and its cohort: figures read level by
    level (``usage_along``'s order), each compared with its own."""
    t = tree(queue("a", "c", 4), queue("b", "c", 3))
    for name, cpu, memory in admitted:
        t.add(name, {FR: cpu, FR2: memory})
    node = t.queues["a"]
    asked = {FR: 1, FR2: 1}
    now = usage_along(node, asked)
    expected = all(held >= then for held, then in zip(now, read, strict=True))
    assert used_no_less(node, asked, tuple(read)) is expected
    assert used_no_less(node, asked, now)


def test_a_nodes_usage_lists_what_its_cells_wrote_in_the_order_first_written() -> None:
    # What the usage meter and the repeat signatures read: every
    # flavor-resource ever held there, 0 where given back, first held first.
    mem = flavor_resource("default", "memory")
    group = ResourceGroup(
        ("cpu", "memory"),
        (FlavorQuotas("default", {"cpu": Quota(4), "memory": Quota(8)}),),
    )
    t = tree(ClusterQueue("a", cohort="c", resource_groups=(group,)))
    node, root = t.queues["a"], t.cohorts["c"]
    assert node.usage == {} and node.used(FR) == 0
    t.add("a", {mem: 3})
    t.add("a", {FR: 6})  # nothing kept locally: all of it is the cohort's usage too
    assert list(node.usage.items()) == [(mem, 3), (FR, 6)]
    assert (node.used(FR), root.used(FR), root.used(mem)) == (6, 6, 3)
    t.remove("a", {mem: 3})
    assert list(node.usage.items()) == list(root.usage.items()) == [(mem, 0), (FR, 6)]
