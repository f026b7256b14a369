"""What a team's queues can borrow right now, per GPU flavor, as Kueue would
decide it: the admission engine's quota tree (``queues.engine.quota``) on the
current policy, loaded with each queue's usage from the newest snapshot sync
took of the ClusterQueues' status.

A queue can borrow no more than its borrowing limit minus what it already
borrows, and no more than the idle quota the rest of its cohort could lend
(unused nominal quota, within lending limits, less what others already
borrow). Each lender's idle GPUs are its unused lendable quota less what sync
attributed to it as lent. Only flavors the queue's class may run on are offered: a class that
refuses spot is never told it could borrow spot GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Max

from cluster.models import QueueSnapshot
from cluster.state import PolicyUnavailable, current_policy
from queues.choices import CapacityType
from queues.engine.quota import QuotaTree
from queues.models import ClusterQueue, ResourceFlavor

GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class Lender:
    queue: str
    idle: int


@dataclass(frozen=True)
class FlavorBorrowing:
    """One flavor a queue may borrow GPUs of."""

    flavor: str
    borrowed: int  # GPUs it borrows now
    limit: int | None  # its borrowing limit (None: no limit)
    can_borrow: int  # how many more it could borrow now
    lenders: list[Lender]  # who in the cohort has idle GPUs of this flavor


@dataclass
class QueueBorrowing:
    queue: str
    cohort: str | None
    flavors: list[FlavorBorrowing] = field(default_factory=list)
    # Flavors in the queue's quota that its queue class may not run on.
    unusable: list[str] = field(default_factory=list)


def _usage_by_queue() -> dict[str, dict[str, tuple[int, int, int]]]:
    """(usage, borrowed, lent) GPUs per ClusterQueue and flavor, newest snapshot
    of each queue."""
    newest = dict(
        QueueSnapshot.objects.filter(resource=GPU)
        .values("cluster_queue")
        .annotate(at=Max("at"))
        .values_list("cluster_queue", "at")
    )
    found: dict[str, dict[str, tuple[int, int, int]]] = {}
    if not newest:
        return found
    rows = QueueSnapshot.objects.filter(
        resource=GPU, cluster_queue__in=list(newest), at__in=set(newest.values())
    ).values_list("cluster_queue", "at", "flavor", "usage", "borrowed", "lent")
    for queue, at, flavor, usage, borrowed, lent in rows:
        if newest.get(queue) == at:
            found.setdefault(queue, {})[flavor] = (int(usage), int(borrowed), int(lent))
    return found


def borrowing_now(queue_names: list[str]) -> list[QueueBorrowing]:
    """For each named ClusterQueue: per usable GPU flavor, what it borrows, its
    limit, how many more GPUs it could borrow now and who has them idle."""
    queues = {
        q.name: q
        for q in ClusterQueue.objects.filter(name__in=queue_names).select_related(
            "cohort", "queue_class"
        )
    }
    spot = set(
        ResourceFlavor.objects.filter(capacity_type=CapacityType.SPOT).values_list(
            "name", flat=True
        )
    )
    try:
        policy = current_policy()
    except PolicyUnavailable:
        return [QueueBorrowing(name, None) for name in queue_names if name in queues]
    tree = QuotaTree(policy)
    usage = _usage_by_queue()
    for name, flavors in usage.items():
        if name in tree.queues:
            tree.add(name, {(flavor, GPU): used for flavor, (used, _, _) in flavors.items()})
    result = []
    for name in queue_names:
        queue = queues.get(name)
        node = tree.queues.get(name)
        if queue is None or node is None:
            continue
        row = QueueBorrowing(name, queue.cohort.name if queue.cohort else None)
        result.append(row)
        spot_ok = bool(queue.queue_class and queue.queue_class.spot_allowed)
        for flavor, resource in sorted(node.quotas):
            if resource != GPU:
                continue
            if flavor in spot and not spot_ok:
                row.unusable.append(flavor)
                continue
            if node.parent is None:
                continue  # not in a cohort: nobody to borrow from
            fr = (flavor, GPU)
            own_unused = max(0, node.nominal(fr) - node.used(fr))
            can = max(0, node.available(fr) - own_unused)
            peers = [p for p in node.root().queues() if p is not node]
            lenders = []
            for peer in peers:
                # Unused quota it may lend, less what it already lends to others.
                unused = max(0, peer.nominal(fr) - peer.used(fr))
                limit = peer.lending_limit(fr)
                lendable = unused if limit is None else min(unused, limit)
                idle = max(0, lendable - usage.get(peer.name, {}).get(flavor, (0, 0, 0))[2])
                if idle:
                    lenders.append(Lender(peer.name, idle))
            lenders.sort(key=lambda lender: (-lender.idle, lender.queue))
            row.flavors.append(
                FlavorBorrowing(
                    flavor=flavor,
                    borrowed=usage.get(name, {}).get(flavor, (0, 0, 0))[1],
                    limit=node.borrowing_limit(fr),
                    can_borrow=can,
                    lenders=lenders,
                )
            )
    return result
