"""Quota grant endpoints (``/api/v1/quota-grants/``): list, ask, detail,
approve, reject, end.

The views parse and delegate: who sees what is ``grants.access``, the writes
are ``grants.services`` and ``grants.lifecycle``. A grant the user may not see
answers 404, as if it did not exist; one they see but may not decide or end,
403 with the rule; a grant already decided, 409 ``already-decided``."""

from __future__ import annotations

from typing import Any

import django_filters as filters
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.hidden_objects import HiddenObjectsLogged
from accounts.api.strict_query import StrictFilterSet
from accounts.models import AccessDenial
from accounts.services import record_access_denial
from grants import lifecycle
from grants.access import NotAllowed, may_decide, may_end, visible_to
from grants.impact import whatif_waits
from grants.models import GrantKind, GrantState, QuotaGrant
from grants.services import describe, request_grant
from queues.api.fields import StrictSerializer
from queues.quantity import format_canonical


class GrantFilter(StrictFilterSet):
    state = filters.ChoiceFilter(choices=GrantState.choices)
    cluster_queue = filters.CharFilter()
    team = filters.CharFilter(field_name="team__slug")

    class Meta:
        model = QuotaGrant
        fields = ["state", "cluster_queue", "team"]


class GrantSerializer(serializers.ModelSerializer):
    """A grant as stored, its amount in Kubernetes notation, and what the
    user asking may do to it now."""

    team: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )
    requester: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    decided_by: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    ended_by: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    amount = serializers.SerializerMethodField()
    summary = serializers.SerializerMethodField()
    impact = serializers.JSONField(read_only=True)
    applied = serializers.JSONField(read_only=True)
    reverted = serializers.JSONField(read_only=True)
    whatif = serializers.SerializerMethodField(
        help_text="what the grant's what-if run says about waits, per ClusterQueue "
        "(seconds), or null without a run"
    )
    can_decide = serializers.SerializerMethodField()
    can_end = serializers.SerializerMethodField()

    class Meta:
        model = QuotaGrant
        fields = [
            "id", "state", "summary", "team", "requester", "cluster_queue", "kind", "lender",
            "flavor", "resource", "amount", "justification", "created_at", "ends_at", "impact",
            "whatif_run", "whatif", "decided_by", "decided_at", "comment",
            "acknowledged_preemption", "applied", "applied_at", "ended_at", "ended_by",
            "end_reason", "reverted", "can_decide", "can_end",
        ]  # fmt: skip
        read_only_fields = fields

    def get_amount(self, grant: QuotaGrant) -> str:
        return format_canonical(grant.resource, grant.amount)

    def get_summary(self, grant: QuotaGrant) -> str:
        return describe(grant)

    def get_whatif(self, grant: QuotaGrant) -> dict[str, Any] | None:
        return whatif_waits(grant.whatif_run, grant.cluster_queue)

    def get_can_decide(self, grant: QuotaGrant) -> bool:
        user = self.context["request"].user
        return grant.state == GrantState.PENDING and may_decide(user, grant)

    def get_can_end(self, grant: QuotaGrant) -> bool:
        user = self.context["request"].user
        return grant.is_open and may_end(user, grant)


class GrantRequestSerializer(StrictSerializer):
    # Strings: the service parses and names the rule (the CLI and the page
    # send the same fields and get the same errors).
    cluster_queue = serializers.CharField(allow_blank=True, required=False)
    kind = serializers.ChoiceField(choices=GrantKind.choices, required=False)
    flavor = serializers.CharField(allow_blank=True, required=False)
    resource = serializers.CharField(allow_blank=True, required=False)
    amount = serializers.CharField(
        allow_blank=True, required=False, help_text="a quantity: 16 (GPUs), 64 (cpu), 512Gi"
    )
    lender = serializers.CharField(allow_blank=True, required=False)
    ends_at = serializers.CharField(
        allow_blank=True, required=False, help_text="ISO 8601, e.g. 2026-12-04T18:00:00Z"
    )
    justification = serializers.CharField(allow_blank=True, required=False, trim_whitespace=False)


class GrantApproveSerializer(StrictSerializer):
    comment = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    acknowledge_preemption = serializers.BooleanField(
        required=False,
        default=False,
        help_text="required when the impact lists workloads that would be preempted",
    )


class GrantRejectSerializer(StrictSerializer):
    reason = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)


class GrantEndSerializer(StrictSerializer):
    reason = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)


IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    description="Any value unique to this decision: sent again, the same decision by the "
    "same user answers as the first did instead of 409 already-decided.",
)
RESPONSES = {
    200: GrantSerializer,
    400: OpenApiResponse(description="bad input, naming the field and the rule"),
    403: OpenApiResponse(description="`not-an-approver`, `requester-cannot-decide`, ..."),
    409: OpenApiResponse(description="`already-decided`: the detail names who and when"),
}


def _refused(request: Request, refused: NotAllowed) -> Response:
    record_access_denial(
        request, reason=AccessDenial.Reason.FORBIDDEN, detail=f"{refused.rule}: {refused.message}"
    )
    return Response(
        {"detail": refused.message, "rule": refused.rule}, status=status.HTTP_403_FORBIDDEN
    )


def _key(request: Request) -> str:
    key = request.headers.get(IDEMPOTENCY_KEY.name, "")
    if len(key) > 64 or not key.isprintable():
        raise ValidationError({IDEMPOTENCY_KEY.name: ["at most 64 printable characters"]})
    return key


class QuotaGrantViewSet(
    HiddenObjectsLogged,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Expiring quota grants: extra quota for a team's ClusterQueue until a moment."""

    permission_classes = [IsAuthenticated]
    filterset_class = GrantFilter
    ordering_fields = ["created_at", "ends_at"]
    lookup_value_regex = "[0-9]+"
    serializer_class = GrantSerializer

    def get_queryset(self) -> Any:
        return visible_to(self.request.user).select_related(
            "team", "requester", "decided_by", "ended_by", "whatif_run"
        )

    def _answer(self, grant: QuotaGrant, code: int = status.HTTP_200_OK) -> Response:
        fresh = self.get_queryset().get(pk=grant.pk)
        return Response(GrantSerializer(fresh, context={"request": self.request}).data, status=code)

    @extend_schema(request=GrantRequestSerializer, responses={**RESPONSES, 201: GrantSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Ask for extra quota: stored pending, with its impact and a what-if run."""
        body = GrantRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            grant = request_grant(request.user, dict(body.validated_data))
        except NotAllowed as refused:
            return _refused(request, refused)
        return self._answer(grant, status.HTTP_201_CREATED)

    @extend_schema(
        request=GrantApproveSerializer, parameters=[IDEMPOTENCY_KEY], responses=RESPONSES
    )
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str | None = None) -> Response:
        """Approve a pending grant: its changes are applied to the policy now."""
        target = self.get_object()
        body = GrantApproveSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            grant = lifecycle.approve(
                request.user,
                target.pk,
                comment=body.validated_data.get("comment", ""),
                acknowledge=body.validated_data["acknowledge_preemption"],
                key=_key(request),
            )
        except NotAllowed as refused:
            return _refused(request, refused)
        return self._answer(grant)

    @extend_schema(request=GrantRejectSerializer, parameters=[IDEMPOTENCY_KEY], responses=RESPONSES)
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str | None = None) -> Response:
        """Reject a pending grant with a reason."""
        target = self.get_object()
        body = GrantRejectSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            grant = lifecycle.reject(
                request.user,
                target.pk,
                reason=body.validated_data.get("reason", ""),
                key=_key(request),
            )
        except NotAllowed as refused:
            return _refused(request, refused)
        return self._answer(grant)

    @extend_schema(request=GrantEndSerializer, responses=RESPONSES)
    @action(detail=True, methods=["post"])
    def end(self, request: Request, pk: str | None = None) -> Response:
        """End a grant early: an active one is reverted, a pending one withdrawn."""
        target = self.get_object()
        body = GrantEndSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            grant = lifecycle.end(
                request.user, target.pk, reason=body.validated_data.get("reason", "")
            )
        except NotAllowed as refused:
            return _refused(request, refused)
        return self._answer(grant)
