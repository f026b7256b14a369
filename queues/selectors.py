"""Policy reads: querysets shaped for the API, the admin and (later) the dashboard."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, Q, QuerySet

from accounts.roles import is_platform_admin
from queues.access import team_ids_of, visible_to
from queues.choices import PolicyKind
from queues.models import (
    ClusterQueue,
    Cohort,
    KueueConfiguration,
    LocalQueue,
    PolicyChange,
    QueueClass,
    Quota,
    ResourceFlavor,
    Team,
    TeamMembership,
    Topology,
    WorkloadPriorityClass,
)
from queues.models.kueue_configuration import SINGLETON_ID

_QUOTAS = Prefetch("quotas", queryset=Quota.objects.select_related("flavor"))


def teams() -> QuerySet[Team]:
    return Team.objects.prefetch_related("namespaces")


def topologies() -> QuerySet[Topology]:
    return Topology.objects.all()


def resource_flavors() -> QuerySet[ResourceFlavor]:
    return ResourceFlavor.objects.all()


def cohorts() -> QuerySet[Cohort]:
    return Cohort.objects.select_related("parent").prefetch_related(_QUOTAS)


def cluster_queues() -> QuerySet[ClusterQueue]:
    return ClusterQueue.objects.select_related(
        "team", "cohort", "queue_class", "default_priority_class"
    ).prefetch_related(_QUOTAS)


def local_queues() -> QuerySet[LocalQueue]:
    return LocalQueue.objects.select_related("namespace__team", "cluster_queue")


def priority_classes() -> QuerySet[WorkloadPriorityClass]:
    return WorkloadPriorityClass.objects.all()


def queue_classes() -> QuerySet[QueueClass]:
    return QueueClass.objects.select_related("default_priority_class")


def kueue_configuration() -> KueueConfiguration:
    """The stored Kueue manager configuration, or Kueue's defaults at revision 0
    before anyone saved one (then Berth renders no ConfigMap for it)."""
    stored = KueueConfiguration.objects.filter(pk=SINGLETON_ID).first()
    return stored or KueueConfiguration.unsaved()


def private_teams_for(user: Any) -> QuerySet[Team]:
    """Teams whose private parts (members, later jobs) ``user`` may see: their own
    teams, or all of them for a platform admin."""
    return visible_to(user, Team.objects.all(), team="pk")


def memberships_of(team: Team) -> QuerySet[TeamMembership]:
    return team.memberships.select_related("user").order_by("user__username", "role")


def history_for(user: Any) -> QuerySet[PolicyChange]:
    """Policy history ``user`` may read: everything for admins; for others every
    public change plus the membership changes of their own teams since each team
    was created (a slug can be reused, and the old team's members stay private)."""
    changes = PolicyChange.objects.select_related("actor")
    if is_platform_admin(user):
        return changes
    visible = ~Q(kind=PolicyKind.TEAM_MEMBERSHIP)
    for slug, created_at in Team.objects.filter(pk__in=team_ids_of(user)).values_list(
        "slug", "created_at"
    ):
        visible |= Q(kind=PolicyKind.TEAM_MEMBERSHIP, team_slug=slug, at__gte=created_at)
    return changes.filter(visible)
