"""Policy writes. Every write validates the whole resulting object, holds the
policy write lock, and records who changed what in ``PolicyChange``.

Each kind's service has ``create(actor=, data=)``, ``update(actor=, obj=, data=,
expected_revision=)`` and ``delete(actor=, obj=, expected_revision=)``; they raise
``PolicyInvalid`` (nothing saved) or ``PolicyConflict``. Kueue's manager
configuration, a singleton, has ``kueue_configuration.update(actor=, data=,
expected_revision=)``.
"""

from queues.services import kueue_configuration
from queues.services.classes import priority_classes, queue_classes
from queues.services.cluster_queues import cluster_queues
from queues.services.cohorts import cohorts
from queues.services.common import StaleRevision
from queues.services.flavors import resource_flavors
from queues.services.local_queues import local_queues, sync_generated_local_queues
from queues.services.teams import set_membership, teams
from queues.services.topologies import topologies

__all__ = [
    "StaleRevision",
    "cluster_queues",
    "cohorts",
    "kueue_configuration",
    "local_queues",
    "priority_classes",
    "queue_classes",
    "resource_flavors",
    "set_membership",
    "sync_generated_local_queues",
    "teams",
    "topologies",
]
