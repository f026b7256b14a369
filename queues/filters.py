"""Filter sets shared by the API and the dashboard."""

from __future__ import annotations

import django_filters as filters

from accounts.api.moments import UtcDateTimeFilter
from accounts.api.strict_query import StrictFilterSet
from queues.choices import ChangeAction, PolicyKind
from queues.models import (
    ClusterQueue,
    Cohort,
    LocalQueue,
    PolicyChange,
    QueueClass,
    ResourceFlavor,
    Team,
    Topology,
    WorkloadPriorityClass,
)


class TeamFilter(StrictFilterSet):
    namespace = filters.CharFilter(field_name="namespaces__name", label="Owns this namespace")

    class Meta:
        model = Team
        fields = ["slug"]


class TopologyFilter(StrictFilterSet):
    class Meta:
        model = Topology
        fields = ["name"]


class ResourceFlavorFilter(StrictFilterSet):
    class Meta:
        model = ResourceFlavor
        fields = ["capacity_type", "topology_name"]


class CohortFilter(StrictFilterSet):
    parent = filters.CharFilter(field_name="parent__name")
    root = filters.BooleanFilter(field_name="parent", lookup_expr="isnull", label="Has no parent")

    class Meta:
        model = Cohort
        fields = ["parent", "root"]


class ClusterQueueFilter(StrictFilterSet):
    team = filters.CharFilter(field_name="team__slug")
    cohort = filters.CharFilter(field_name="cohort__name")
    queue_class = filters.CharFilter(field_name="queue_class__name")
    shared = filters.BooleanFilter(
        field_name="team", lookup_expr="isnull", label="Shared by all teams"
    )
    flavor = filters.CharFilter(
        field_name="quotas__flavor__name", distinct=True, label="Has quota in this flavor"
    )

    class Meta:
        model = ClusterQueue
        fields = ["team", "cohort", "queue_class", "queueing_strategy", "shared", "flavor"]


class LocalQueueFilter(StrictFilterSet):
    namespace = filters.CharFilter(field_name="namespace__name")
    team = filters.CharFilter(field_name="namespace__team__slug")
    cluster_queue = filters.CharFilter(field_name="cluster_queue__name")

    class Meta:
        model = LocalQueue
        fields = ["namespace", "name", "team", "cluster_queue", "generated"]


class PriorityClassFilter(StrictFilterSet):
    value_min = filters.NumberFilter(field_name="value", lookup_expr="gte")
    value_max = filters.NumberFilter(field_name="value", lookup_expr="lte")

    class Meta:
        model = WorkloadPriorityClass
        fields = ["value_min", "value_max"]


class QueueClassFilter(StrictFilterSet):
    class Meta:
        model = QueueClass
        fields = QueueClass.rule_flags()


class PolicyChangeFilter(StrictFilterSet):
    kind = filters.ChoiceFilter(choices=PolicyKind.choices)
    action = filters.ChoiceFilter(choices=ChangeAction.choices)
    actor = filters.CharFilter(field_name="actor_username")
    since = UtcDateTimeFilter(field_name="at", lookup_expr="gte")
    until = UtcDateTimeFilter(field_name="at", lookup_expr="lt")

    class Meta:
        model = PolicyChange
        fields = ["kind", "action", "object_name", "actor", "since", "until"]
