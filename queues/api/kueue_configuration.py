"""``/api/v1/policy/kueue-configuration/``: the settings of Kueue's manager
configuration that Berth keeps, in Kueue's own camelCase shape.

GET answers the stored configuration (Kueue's defaults at revision 0 before the
first save); PUT replaces it (platform admins), with ``If-Match`` against the
revision edited. The serializers check shape and types, the service the rules.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from queues import selectors, services, snapshots
from queues.api.fields import StrictSerializer, choice
from queues.api.permissions import ReadPolicyOrAdminWrites
from queues.api.views import IF_MATCH, expected_revision
from queues.choices import PreemptionStrategy, RequeuingTimestamp
from queues.models import KueueConfiguration


def _duration(help_text: str, **kwargs: Any) -> serializers.CharField:
    # Parsed (and checked) by the service, which names the Go duration rule.
    return serializers.CharField(help_text=f"Go duration, e.g. {help_text}", **kwargs)


class FairSharingSerializer(StrictSerializer):
    enable = serializers.BooleanField(
        required=False, help_text="Preempt and order by the queues' weighted share (Kueue)"
    )
    preemptionStrategies = serializers.ListField(
        child=choice(PreemptionStrategy),
        required=False,
        help_text="[LessThanOrEqualToFinalShare, LessThanInitialShare] (default), "
        "[LessThanOrEqualToFinalShare] or [LessThanInitialShare]",
    )


class AdmissionFairSharingSerializer(StrictSerializer):
    usageHalfLifeTime = _duration("168h; how fast past usage is forgotten")
    usageSamplingInterval = _duration("5m (default); how often usage is sampled", required=False)


class RequeuingStrategySerializer(StrictSerializer):
    timestamp = choice(RequeuingTimestamp, required=False)
    backoffLimitCount = serializers.IntegerField(
        required=False, allow_null=True, help_text="Requeues before deactivation; null: no limit"
    )
    backoffBaseSeconds = serializers.IntegerField(required=False, help_text="Default 60")
    backoffMaxSeconds = serializers.IntegerField(required=False, help_text="Default 3600")


class WaitForPodsReadySerializer(StrictSerializer):
    enable = serializers.BooleanField(
        required=False, help_text="Answered true; false (like null) turns the section off"
    )
    timeout = _duration(
        "5m (default); how long an admitted workload's pods may take", required=False
    )
    blockAdmission = serializers.BooleanField(required=False)
    requeuingStrategy = RequeuingStrategySerializer(required=False, allow_null=True)
    recoveryTimeout = _duration("3m; optional", required=False, allow_null=True, allow_blank=True)


class KueueConfigurationSerializer(StrictSerializer):
    """Kueue's Configuration, the sections Berth keeps; a null section is off."""

    fairSharing = FairSharingSerializer(required=False, allow_null=True)
    admissionFairSharing = AdmissionFairSharingSerializer(required=False, allow_null=True)
    waitForPodsReady = WaitForPodsReadySerializer(required=False, allow_null=True)
    revision = serializers.IntegerField(
        read_only=True, help_text="0 until first saved; send it back in If-Match"
    )
    created_at = serializers.DateTimeField(read_only=True, allow_null=True)
    updated_at = serializers.DateTimeField(read_only=True, allow_null=True)

    def to_representation(self, instance: KueueConfiguration) -> dict[str, Any]:
        data = snapshots.kueue_configuration(instance)
        data["revision"] = instance.revision
        stamp = serializers.DateTimeField()
        data["created_at"] = (
            stamp.to_representation(instance.created_at) if instance.is_saved else None
        )
        data["updated_at"] = (
            stamp.to_representation(instance.updated_at) if instance.is_saved else None
        )
        return data


class KueueConfigurationView(APIView):
    """Kueue's manager configuration as Berth keeps it: fair sharing, admission
    fair sharing and waitForPodsReady. Rendered into ConfigMap
    ``kueue-system/kueue-manager-config``: applied on the simulated cluster, a
    manual step on a real one (see ``policy/plan/``)."""

    permission_classes = [ReadPolicyOrAdminWrites]
    serializer_class = KueueConfigurationSerializer

    def _respond(self, configuration: KueueConfiguration) -> Response:
        data = KueueConfigurationSerializer(configuration).data
        return Response(data, headers={"ETag": f'"{configuration.revision}"'})

    @extend_schema(responses=KueueConfigurationSerializer)
    def get(self, request: Request) -> Response:
        return self._respond(selectors.kueue_configuration())

    @extend_schema(
        request=KueueConfigurationSerializer,
        responses=KueueConfigurationSerializer,
        parameters=[IF_MATCH],
    )
    def put(self, request: Request) -> Response:
        """Replace the configuration: a section left out or null is off (fair
        sharing: back to its defaults)."""
        serializer = KueueConfigurationSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        configuration = services.kueue_configuration.update(
            actor=request.user,
            data=serializer.validated_data,
            expected_revision=expected_revision(request),
        )
        return self._respond(configuration)
