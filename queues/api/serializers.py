"""Request and response shapes of the policy API.

Serializers check the shape and types of a request; the services check the
policy rules on the whole resulting object. Responses are the objects'
snapshots (the same shape a client sends), plus bookkeeping fields, so what a
client GETs it can PUT back.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from queues import snapshots
from queues.api.fields import QuantityField, StrictSerializer, WeightField, choice
from queues.choices import (
    AdmissionMode,
    BorrowWithinCohortPolicy,
    CapacityType,
    FungibilityAction,
    FungibilityPreference,
    QueueingStrategy,
    ReclaimWithinCohort,
    StopPolicy,
    TeamRole,
    WithinClusterQueue,
)
from queues.services.flavors import snapshot as flavor_snapshot


class PolicySerializer(StrictSerializer):
    """Adds the bookkeeping every policy object answers with."""

    revision = serializers.IntegerField(
        read_only=True, help_text="Send it back in If-Match to refuse stale edits"
    )
    created_at = serializers.DateTimeField(read_only=True)
    updated_at = serializers.DateTimeField(read_only=True)

    def snapshot(self, instance: Any) -> dict[str, Any]:
        raise NotImplementedError

    def to_representation(self, instance: Any) -> dict[str, Any]:
        data = self.snapshot(instance)
        data["revision"] = instance.revision
        data["created_at"] = serializers.DateTimeField().to_representation(instance.created_at)
        data["updated_at"] = serializers.DateTimeField().to_representation(instance.updated_at)
        return data


def _name(**kwargs: Any) -> serializers.CharField:
    # Length and syntax are checked by the policy rules, under the DNS-1123 rule.
    return serializers.CharField(**kwargs)


def _reference(help_text: str) -> serializers.CharField:
    return serializers.CharField(
        required=False, allow_null=True, allow_blank=True, help_text=help_text
    )


class TeamSerializer(PolicySerializer):
    slug = _name(help_text="RFC 1123 label; cannot change")
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True)
    namespaces = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="Namespaces the team owns; defaults to [slug]",
    )

    def snapshot(self, instance: Any) -> dict[str, Any]:
        return snapshots.team(instance)


class MembershipSerializer(StrictSerializer):
    username = serializers.CharField(max_length=150)
    role = choice(TeamRole, required=False, default=TeamRole.MEMBER)


class TeamMembersSerializer(serializers.Serializer):
    team = serializers.CharField(read_only=True)
    members = MembershipSerializer(many=True, read_only=True)


class TaintSerializer(StrictSerializer):
    key = serializers.CharField()
    value = serializers.CharField(required=False, allow_blank=True)
    effect = serializers.CharField()


class TolerationSerializer(StrictSerializer):
    key = serializers.CharField(required=False, allow_blank=True)
    operator = serializers.CharField(required=False)
    value = serializers.CharField(required=False, allow_blank=True)
    effect = serializers.CharField(required=False, allow_blank=True)
    toleration_seconds = serializers.IntegerField(required=False, allow_null=True)


class TopologySerializer(PolicySerializer):
    name = _name(help_text="RFC 1123 subdomain; cannot change")
    description = serializers.CharField(required=False, allow_blank=True)
    levels = serializers.ListField(
        # Blank and malformed keys are refused by the policy rules, naming the level.
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        help_text="Node label keys, widest domain first (e.g. topology.berth.dev/block, "
        "topology.berth.dev/rack, kubernetes.io/hostname); 1 to 16, kubernetes.io/hostname "
        "only last; cannot change once created",
    )

    def snapshot(self, instance: Any) -> dict[str, Any]:
        return snapshots.topology(instance)


@extend_schema_field(
    {
        "type": "string",
        "nullable": True,
        "pattern": r"^(0|[1-9][0-9]*)(\.[0-9]{1,4})?$",
        "example": "2.49",
    }
)
class PriceField(serializers.Field):
    """A price per GPU-hour in BERTH_CURRENCY: a decimal string with up to four
    decimals (``"2.49"``), or null for not priced. The policy rules
    (``queues.prices``) judge it, naming the rule; a JSON number is refused there."""

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class ResourceFlavorSerializer(PolicySerializer):
    name = _name(help_text="RFC 1123 subdomain; cannot change")
    description = serializers.CharField(required=False, allow_blank=True)
    node_labels = serializers.DictField(
        child=serializers.CharField(allow_blank=True), required=False
    )
    node_taints = TaintSerializer(many=True, required=False)
    tolerations = TolerationSerializer(many=True, required=False)
    capacity_type = choice(CapacityType, required=False)
    topology_name = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="A Topology's name (topologies/): makes the flavor topology-aware; "
        "Kueue then freezes topology_name, node_labels and tolerations",
    )
    gpu_hour_price = PriceField(
        required=False,
        allow_null=True,
        help_text="What one GPU-hour on this flavor costs, in the installation's currency "
        '(BERTH_CURRENCY): a decimal string with up to 4 decimals, e.g. "2.49"; null: not '
        "priced. Showback charges each hour at the price in force then.",
    )

    def snapshot(self, instance: Any) -> dict[str, Any]:
        return flavor_snapshot(instance)


class ResourceQuotaSerializer(StrictSerializer):
    name = serializers.CharField(help_text="Resource name, e.g. nvidia.com/gpu")
    nominal_quota = QuantityField()
    borrowing_limit = QuantityField(required=False, allow_null=True)
    lending_limit = QuantityField(required=False, allow_null=True)


class FlavorQuotasSerializer(StrictSerializer):
    name = serializers.CharField(help_text="ResourceFlavor name")
    resources = ResourceQuotaSerializer(many=True)


class ResourceGroupSerializer(StrictSerializer):
    covered_resources = serializers.ListField(child=serializers.CharField())
    flavors = FlavorQuotasSerializer(many=True, help_text="In order of preference")


class CohortSerializer(PolicySerializer):
    name = _name(help_text="RFC 1123 subdomain; cannot change")
    description = serializers.CharField(required=False, allow_blank=True)
    # DRF's metaclass moves declared fields off the class, so this does not shadow
    # Field.parent at run time; mypy only sees the class body.
    parent = _reference("Parent cohort name; empty for a root")  # type: ignore[assignment]
    fair_sharing_weight = WeightField(required=False)
    resource_groups = ResourceGroupSerializer(many=True, required=False)

    def snapshot(self, instance: Any) -> dict[str, Any]:
        return snapshots.cohort(instance)


class ClusterQueueSerializer(PolicySerializer):
    name = _name(help_text="RFC 1123 label; cannot change")
    description = serializers.CharField(required=False, allow_blank=True)
    team = _reference("Owning team slug; empty for a queue shared by all teams")
    cohort = _reference("Cohort name; empty for a queue that neither lends nor borrows")
    queue_class = _reference("Queue class name; supplies defaults for the fields left empty")
    default_priority_class = _reference("WorkloadPriorityClass for jobs that name none")
    queueing_strategy = choice(QueueingStrategy, required=False, allow_null=True)
    within_cluster_queue = choice(WithinClusterQueue, required=False, allow_null=True)
    reclaim_within_cohort = choice(ReclaimWithinCohort, required=False, allow_null=True)
    borrow_within_cohort_policy = choice(BorrowWithinCohortPolicy, required=False, allow_null=True)
    borrow_within_cohort_max_priority_threshold = serializers.IntegerField(
        required=False, allow_null=True
    )
    fair_sharing_weight = WeightField(required=False)
    when_can_borrow = choice(FungibilityAction, required=False)
    when_can_preempt = choice(FungibilityAction, required=False)
    flavor_fungibility_preference = choice(FungibilityPreference, required=False, allow_blank=True)
    stop_policy = choice(StopPolicy, required=False)
    admission_mode = choice(AdmissionMode, required=False, allow_blank=True)
    resource_groups = ResourceGroupSerializer(many=True, required=False)

    def snapshot(self, instance: Any) -> dict[str, Any]:
        return snapshots.cluster_queue(instance)


class LocalQueueSerializer(PolicySerializer):
    id = serializers.IntegerField(read_only=True)
    namespace = _name()
    name = _name()
    cluster_queue = _name()
    stop_policy = choice(StopPolicy, required=False)
    generated = serializers.BooleanField(
        read_only=True,
        help_text="Kept by Berth for the queue's namespaces; an edit makes it manual",
    )

    def snapshot(self, instance: Any) -> dict[str, Any]:
        return snapshots.local_queue(instance)

    def to_representation(self, instance: Any) -> dict[str, Any]:
        return {"id": instance.pk, **super().to_representation(instance)}


class PriorityClassSerializer(PolicySerializer):
    name = _name(help_text="RFC 1123 subdomain; cannot change")
    value = serializers.IntegerField(help_text="Higher wins; 32-bit signed integer")
    description = serializers.CharField(required=False, allow_blank=True)

    def snapshot(self, instance: Any) -> dict[str, Any]:
        return snapshots.priority_class(instance)


class QueueClassSerializer(PolicySerializer):
    name = _name(help_text="RFC 1123 label; cannot change")
    description = serializers.CharField(required=False, allow_blank=True)
    queueing_strategy = choice(QueueingStrategy, required=False)
    within_cluster_queue = choice(WithinClusterQueue, required=False)
    reclaim_within_cohort = choice(ReclaimWithinCohort, required=False)
    borrow_within_cohort_policy = choice(BorrowWithinCohortPolicy, required=False)
    default_priority_class = _reference("Priority for jobs in queues of this class")
    requires_checkpoint = serializers.BooleanField(required=False)
    requires_approval = serializers.BooleanField(required=False)
    gang_required = serializers.BooleanField(required=False)
    spot_allowed = serializers.BooleanField(required=False)
    max_runtime_seconds = serializers.IntegerField(required=False, allow_null=True)
    max_retries = serializers.IntegerField(required=False, allow_null=True)

    def snapshot(self, instance: Any) -> dict[str, Any]:
        return snapshots.queue_class(instance)


class PolicyChangeSerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    at = serializers.DateTimeField(read_only=True)
    actor = serializers.CharField(source="actor_username", read_only=True)
    kind = serializers.CharField(read_only=True)
    object_name = serializers.CharField(read_only=True)
    action = serializers.CharField(read_only=True)
    changed_fields = serializers.ListField(child=serializers.CharField(), read_only=True)
    before = serializers.JSONField(read_only=True, allow_null=True)
    after = serializers.JSONField(read_only=True, allow_null=True)
    note = serializers.CharField(
        read_only=True, help_text="where the change came from, e.g. an import from a cluster"
    )
