"""``GET /api/v1/jobs/queues/``: where a job can be submitted. Each LocalQueue
of the caller's teams' namespaces with its ClusterQueue and queue class, and
the quota of only those flavors a job sent there may land on, decided by the
submit's own steps (``jobs.flavor_offer.queue_offer``): a queue class that
refuses spot does not offer its queue's spot quota.

The policy endpoints (``local-queues/``, ``cluster-queues/``) show a queue as
an admin wrote it; this one shows what it offers a job. It lives with the jobs
because the policy app may not import them (the import contract)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, viewsets
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.strict_query import flag
from jobs.flavor_offer import QueueOffer, queue_offer
from queues.access import team_ids_of
from queues.choices import CapacityType
from queues.models import ClusterQueue, LocalQueue, ResourceFlavor
from queues.quantity import format_canonical


class QuotaSerializer(serializers.Serializer):
    resource = serializers.CharField()
    nominal_quota = serializers.CharField()
    borrowing_limit = serializers.CharField(allow_null=True)
    lending_limit = serializers.CharField(allow_null=True)


class OfferedFlavorSerializer(serializers.Serializer):
    name = serializers.CharField()
    spot = serializers.BooleanField()
    quota = QuotaSerializer(many=True)


class UnusableFlavorSerializer(serializers.Serializer):
    name = serializers.CharField()
    reason = serializers.CharField()


class SubmitQueueSerializer(serializers.Serializer):
    """A LocalQueue as a place to submit to."""

    namespace = serializers.CharField()
    local_queue = serializers.CharField()
    cluster_queue = serializers.CharField()
    queue_class = serializers.CharField(allow_blank=True)
    team = serializers.CharField(allow_null=True, help_text="owner; null for a shared queue")
    shared = serializers.BooleanField()
    cohort = serializers.CharField(allow_null=True)
    stop_policy = serializers.CharField(allow_null=True)
    spot = serializers.BooleanField(
        help_text="whether a job that leaves spot_allowed out may land on spot capacity"
    )
    flavors = OfferedFlavorSerializer(
        many=True, help_text="the flavors a job submitted here may land on, with their quota"
    )
    unusable_flavors = UnusableFlavorSerializer(
        many=True, help_text="flavors the queue holds quota in that its jobs cannot use, and why"
    )
    problem = serializers.CharField(
        allow_blank=True, help_text="why no job can run here at all; empty when jobs can"
    )


TEAM = OpenApiParameter("team", OpenApiTypes.STR, description="one team's LocalQueues (slug)")
ALL = OpenApiParameter(
    "all", OpenApiTypes.BOOL, description="every LocalQueue, not only your teams'"
)


def _quota(queue: ClusterQueue, flavor: ResourceFlavor) -> list[dict[str, Any]]:
    def amount(resource: str, value: int | None) -> str | None:
        return None if value is None else format_canonical(resource, value)

    return [
        {
            "resource": q.resource,
            "nominal_quota": amount(q.resource, q.nominal_quota),
            "borrowing_limit": amount(q.resource, q.borrowing_limit),
            "lending_limit": amount(q.resource, q.lending_limit),
        }
        for q in queue.quotas.filter(flavor=flavor).order_by("resource_index")
    ]


def submit_queue(local_queue: LocalQueue, offer: QueueOffer) -> dict[str, Any]:
    queue = local_queue.cluster_queue
    return {
        "namespace": local_queue.namespace.name,
        "local_queue": local_queue.name,
        "cluster_queue": queue.name,
        "queue_class": queue.queue_class.name if queue.queue_class else "",
        "team": queue.team.slug if queue.team else None,
        "shared": queue.team_id is None,
        "cohort": queue.cohort.name if queue.cohort else None,
        "stop_policy": local_queue.stop_policy or None,
        "spot": offer.spot,
        "flavors": [
            {
                "name": f.name,
                "spot": f.capacity_type == CapacityType.SPOT,
                "quota": _quota(queue, f),
            }
            for f in offer.usable
        ],
        "unusable_flavors": [
            {"name": name, "reason": reason} for name, reason in offer.unusable.items()
        ],
        "problem": offer.problem,
    }


class SubmitQueueViewSet(viewsets.GenericViewSet):
    """Where you can submit: LocalQueues and the flavors their jobs may use."""

    permission_classes = [IsAuthenticated]
    serializer_class = SubmitQueueSerializer
    filter_backends: list[Any] = []  # `team` and `all` only, read in get_queryset

    def get_queryset(self) -> QuerySet[LocalQueue]:
        queues = LocalQueue.objects.select_related(
            "namespace",
            "cluster_queue__queue_class",
            "cluster_queue__team",
            "cluster_queue__cohort",
        ).order_by("namespace__name", "name")
        team = (self.request.query_params.get("team") or "").strip()
        if team:
            return queues.filter(namespace__team__slug=team)
        if flag(self.request, "all"):
            return queues
        return queues.filter(namespace__team_id__in=team_ids_of(self.request.user))

    @extend_schema(parameters=[TEAM, ALL], responses={200: SubmitQueueSerializer(many=True)})
    def list(self, request: Request) -> Response:
        queues = self.get_queryset()
        page = self.paginate_queryset(queues)
        offers: dict[int, QueueOffer] = {}  # one per ClusterQueue, however many namespaces
        rows = []
        for local_queue in queues if page is None else page:
            queue = local_queue.cluster_queue
            if queue.pk not in offers:
                offers[queue.pk] = queue_offer(queue)
            rows.append(submit_queue(local_queue, offers[queue.pk]))
        data = SubmitQueueSerializer(rows, many=True).data
        return Response(data) if page is None else self.get_paginated_response(data)
