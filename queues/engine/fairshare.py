"""Dominant resource share (DRS), Kueue's fair-sharing measure.

A node's share is how much it borrows beyond its subtree quota, per resource
name (summed across flavors), relative to what its parent could lend it, in
thousandths, for the resource where that ratio is largest, divided by the
node's fair-sharing weight. Roots (and queues without a cohort) have share 0;
a weight of 0 makes any borrowing an infinite share.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from mypy_extensions import mypyc_attr

from queues.engine.frozen_copies import rebuilt_by_fields
from queues.engine.quota import Node


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True)
class Share:
    weighted: float
    unweighted: float
    borrowing: bool
    zero_weight: bool

    @property
    def zero_weight_borrows(self) -> bool:
        return self.zero_weight and self.unweighted != 0


ZERO: Final = Share(0.0, 0.0, False, False)


def dominant_resource_share(node: Node) -> Share:
    if node.parent is None:
        return ZERO
    borrowed: dict[str, int] = {}
    for fr, quota in node.subtree.items():
        over = node.used(fr) - quota
        if over > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + over
    if not borrowed:
        return Share(0.0, 0.0, False, node.weight == 0)
    root = node.root()
    lendable: dict[str, int] = {}
    for fr in root.subtree:
        if fr[1] in borrowed:
            lendable[fr[1]] = lendable.get(fr[1], 0) + node.parent.potential_available(fr)
    ratio = 0.0
    for resource in sorted(borrowed):
        if lendable.get(resource, 0) > 0:
            ratio = max(ratio, borrowed[resource] * 1000 / lendable[resource])
    if ratio == 0:
        weighted = 0.0
    elif node.weight == 0:
        weighted = math.inf
    else:
        weighted = ratio / node.weight
    return Share(weighted, ratio, True, node.weight == 0)


def compare(a: Share, b: Share) -> int:
    """-1 / 0 / 1 like Kueue's CompareDRS: zero-weight borrowers are larger than
    anyone else and compare among themselves by their unweighted ratio."""
    if a.zero_weight_borrows and b.zero_weight_borrows:
        return (a.unweighted > b.unweighted) - (a.unweighted < b.unweighted)
    if a.zero_weight_borrows:
        return 1
    if b.zero_weight_borrows:
        return -1
    return (a.weighted > b.weighted) - (a.weighted < b.weighted)


rebuilt_by_fields(Share)
