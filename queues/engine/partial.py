"""Kueue's partial admission: a workload whose pod sets allow fewer pods
(``minCount``) and that neither fits nor can preempt whole is tried with fewer
pods, by binary search over how far to go towards the minimums — the largest
reduction found is not sought, the first fitting step of the search is taken,
as Kueue's PodSetReducer does.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TypeVar

from queues.engine.model import Workload

R = TypeVar("R")


def admissible_in_part(workload: Workload) -> bool:
    """Some pod set allows fewer pods than it asks for (Kueue's
    CanBePartiallyAdmitted). Here, compiled: asked at every fresh nomination."""
    return any(p.min_count is not None and p.min_count < p.count for p in workload.pod_sets)


def reduced(workload: Workload, counts: dict[str, int]) -> Workload:
    """A copy of ``workload`` asking for ``counts`` pods per pod set."""
    return dataclasses.replace(
        workload,
        pod_sets=tuple(
            dataclasses.replace(p, count=counts.get(p.name, p.count)) for p in workload.pod_sets
        ),
    )


def search(workload: Workload, fits: Callable[[dict[str, int]], R | None]) -> R | None:
    """Kueue's PodSetReducer.Search: step i of ``total`` (the pods the
    minimums allow to drop) takes ``delta * i // total`` pods off each pod set;
    Go's sort.Search finds the first step that fits, remembering the last step
    that did. None when no step fits."""
    full = {p.name: p.count for p in workload.pod_sets}
    deltas = {
        p.name: p.count - (p.min_count if p.min_count is not None else p.count)
        for p in workload.pod_sets
    }
    total = sum(deltas.values())
    if total == 0:
        return None
    last_good, found = -1, None
    low, high = 0, total + 1
    while low < high:
        middle = (low + high) // 2
        counts = {name: full[name] - deltas[name] * middle // total for name in full}
        outcome = fits(counts)
        if outcome is not None:
            last_good, found = middle, outcome
            high = middle
        else:
            low = middle + 1
    return found if low == last_good else None
