"""The admin is Berth's read and audit console for policy.

Policy changes go through the REST API (and the dashboard's policy editor),
where every change is validated as a whole and recorded in history; so the
policy models are read-only here, and the history is browsable.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html

from queues import snapshots
from queues.models import (
    ClusterQueue,
    Cohort,
    KueueConfiguration,
    LocalQueue,
    PolicyChange,
    QueueClass,
    ResourceFlavor,
    Team,
    TeamMembership,
    TeamNamespace,
    Topology,
    WorkloadPriorityClass,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _pretty(data: Any) -> str:
    return format_html("<pre>{}</pre>", json.dumps(data, indent=2, sort_keys=True))


class NamespaceInline(ReadOnlyInline):
    model = TeamNamespace


class MembershipInline(ReadOnlyInline):
    model = TeamMembership
    fields = readonly_fields = ("user", "role", "created_at")


@admin.register(Team)
class TeamAdmin(ReadOnlyAdmin):
    list_display = ["slug", "name", "revision", "updated_at"]
    search_fields = ["slug", "name"]
    inlines = [NamespaceInline, MembershipInline]


@admin.register(Topology)
class TopologyAdmin(ReadOnlyAdmin):
    list_display = ["name", "levels_shown", "revision", "updated_at"]
    search_fields = ["name"]

    @admin.display(description="Levels (widest first)")
    def levels_shown(self, obj: Topology) -> str:
        return " › ".join(obj.levels)


@admin.register(ResourceFlavor)
class ResourceFlavorAdmin(ReadOnlyAdmin):
    list_display = ["name", "capacity_type", "topology_name", "revision", "updated_at"]
    list_filter = ["capacity_type"]
    search_fields = ["name"]


@admin.register(Cohort)
class CohortAdmin(ReadOnlyAdmin):
    list_display = ["name", "parent", "fair_sharing_weight", "revision"]
    readonly_fields = ["quotas"]

    @admin.display(description="Resource groups")
    def quotas(self, obj: Cohort) -> str:
        return _pretty(snapshots.cohort(obj)["resource_groups"])


@admin.register(ClusterQueue)
class ClusterQueueAdmin(ReadOnlyAdmin):
    list_display = ["name", "team", "cohort", "queue_class", "queueing_strategy", "revision"]
    list_filter = ["queue_class", "cohort", "queueing_strategy"]
    search_fields = ["name"]
    readonly_fields = ["quotas"]

    @admin.display(description="Resource groups")
    def quotas(self, obj: ClusterQueue) -> str:
        return _pretty(snapshots.cluster_queue(obj)["resource_groups"])


@admin.register(LocalQueue)
class LocalQueueAdmin(ReadOnlyAdmin):
    list_display = ["__str__", "cluster_queue", "generated", "stop_policy"]
    list_filter = ["generated"]
    search_fields = ["name", "namespace__name"]


@admin.register(WorkloadPriorityClass)
class WorkloadPriorityClassAdmin(ReadOnlyAdmin):
    list_display = ["name", "value", "description"]


@admin.register(QueueClass)
class QueueClassAdmin(ReadOnlyAdmin):
    list_display = ["name", "queueing_strategy", *QueueClass.rule_flags(), "default_priority_class"]


@admin.register(KueueConfiguration)
class KueueConfigurationAdmin(ReadOnlyAdmin):
    list_display = ["__str__", "revision", "updated_at"]
    fields = readonly_fields = ("revision", "updated_at", "settings")

    @admin.display(description="Settings (Kueue's shape)")
    def settings(self, obj: KueueConfiguration) -> str:
        return _pretty(snapshots.kueue_configuration(obj))


@admin.register(PolicyChange)
class PolicyChangeAdmin(ReadOnlyAdmin):
    list_display = ["at", "actor_username", "action", "kind", "object_name", "changed"]
    list_filter = ["kind", "action"]
    search_fields = ["object_name", "actor_username"]
    date_hierarchy = "at"
    fields = readonly_fields = (
        "at",
        "actor_username",
        "action",
        "kind",
        "object_name",
        "team_slug",
        "before_pretty",
        "after_pretty",
    )

    @admin.display(description="Changed fields")
    def changed(self, obj: PolicyChange) -> str:
        return ", ".join(obj.changed_fields)

    @admin.display(description="Before")
    def before_pretty(self, obj: PolicyChange) -> str:
        return _pretty(obj.before)

    @admin.display(description="After")
    def after_pretty(self, obj: PolicyChange) -> str:
        return _pretty(obj.after)
