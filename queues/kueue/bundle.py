"""The policy in Postgres as a ``PolicyBundle`` for rendering (the one place
where ORM rows become render input)."""

from __future__ import annotations

from queues import selectors, snapshots
from queues.kueue.render import PolicyBundle


def current_bundle() -> PolicyBundle:
    configuration = selectors.kueue_configuration()
    return PolicyBundle(
        teams=[snapshots.team(t) for t in selectors.teams()],
        topologies=[snapshots.topology(t) for t in selectors.topologies()],
        flavors=[snapshots.resource_flavor(f) for f in selectors.resource_flavors()],
        cohorts=[snapshots.cohort(c) for c in selectors.cohorts()],
        cluster_queues=[snapshots.cluster_queue(q) for q in selectors.cluster_queues()],
        local_queues=[snapshots.local_queue(q) for q in selectors.local_queues()],
        priority_classes=[snapshots.priority_class(p) for p in selectors.priority_classes()],
        queue_classes=[snapshots.queue_class(c) for c in selectors.queue_classes()],
        kueue_configuration=(
            snapshots.kueue_configuration(configuration) if configuration.is_saved else None
        ),
    )
