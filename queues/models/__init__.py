"""The policy domain: who may use which GPUs, how much, and with what priority."""

from queues.models.classes import QueueClass, WorkloadPriorityClass
from queues.models.cluster import SimulatedClock, SimulatedEvent, SimulatedObject
from queues.models.cohorts import Cohort
from queues.models.fairness import TeamFairness
from queues.models.flavors import ResourceFlavor
from queues.models.history import PolicyChange
from queues.models.kueue_configuration import KueueConfiguration
from queues.models.queues import ClusterQueue, LocalQueue, Quota
from queues.models.reconcile import AdoptedObject, DriftRecord, KueueReading, ReconcileRun
from queues.models.teams import Team, TeamMembership, TeamNamespace
from queues.models.topologies import Topology

__all__ = [
    "AdoptedObject",
    "ClusterQueue",
    "Cohort",
    "DriftRecord",
    "KueueConfiguration",
    "KueueReading",
    "LocalQueue",
    "PolicyChange",
    "QueueClass",
    "Quota",
    "ReconcileRun",
    "ResourceFlavor",
    "SimulatedClock",
    "SimulatedEvent",
    "SimulatedObject",
    "Team",
    "TeamFairness",
    "TeamMembership",
    "TeamNamespace",
    "Topology",
    "WorkloadPriorityClass",
]
