"""The order Kueue walks a pod set's resources in (``messages.request_order``):
FNV-1a of the name, then the name. Kept per set of names once worked out; the
order is the same however the names are given, and however many sets were
asked about before."""

from __future__ import annotations

import itertools

from queues.engine.messages import fnv1a64, request_order

# The order the uncached sort gave before the sets were kept.
KUEUE_ORDER = ("memory", "nvidia.com/gpu", "pods", "cpu")


def _walked(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted(names, key=lambda name: (fnv1a64(name), name)))


def test_the_walk_order_is_the_same_for_every_order_given() -> None:
    for given in itertools.permutations(KUEUE_ORDER):
        assert request_order(given) == KUEUE_ORDER
    assert request_order({"pods": 1, "nvidia.com/gpu": 8}) == ("nvidia.com/gpu", "pods")
    given = iter(["example.com/a", "example.com/b", "example.com/c"])
    assert request_order(given) == ("example.com/c", "example.com/b", "example.com/a")


def test_the_order_holds_past_the_kept_sets_bound() -> None:
    asked = [(f"example.com/r{n}", "cpu", f"example.com/s{n}") for n in range(5000)]
    for names in asked:  # more sets than are kept: the table starts again
        assert request_order(names) == _walked(names)
    for names in asked[:10]:  # asked again after the table started again
        assert request_order(names) == _walked(names)
    assert request_order(["cpu", "pods", "memory", "nvidia.com/gpu"]) == KUEUE_ORDER
