"""The ``approval`` field of a job in the API (``/api/v1/jobs/{id}/``): its
latest approval request, as ``berth status`` and ``berth why`` show it.
Registered with the jobs API at start-up (jobs sits below approvals and may
not import it), with the field's schema for the OpenAPI document."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from rest_framework import serializers

from approvals.models import ApprovalRequest, ApprovalState
from approvals.notify import request_url
from jobs.models import JobRequest


class JobApprovalSerializer(serializers.ModelSerializer):
    """A job's latest approval request (``urgent-release`` queues), as ``berth
    status`` and ``berth why`` show it. ``reason``: the approver's comment, the
    rejection's reason, ``expired``, or why it was withdrawn; null when there is
    none. ``url``: the request's page on the dashboard."""

    state = serializers.ChoiceField(choices=ApprovalState.choices, read_only=True)
    requested_at = serializers.DateTimeField(source="created_at", read_only=True)
    deadline = serializers.DateTimeField(
        source="expires_at",
        read_only=True,
        help_text="undecided by then, it is rejected as expired",
    )
    decided_by: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username",
        read_only=True,
        allow_null=True,
        help_text="the approver; null while pending and when expired or withdrawn",
    )
    reason = serializers.SerializerMethodField(
        help_text="the approver's comment, the rejection's reason, expired, or why it was "
        "withdrawn; null when there is none"
    )
    url = serializers.SerializerMethodField(help_text="the request's page on the dashboard")

    class Meta:
        model = ApprovalRequest
        fields = [
            "id", "state", "requested_at", "deadline", "decided_by", "decided_at", "reason", "url",
        ]  # fmt: skip
        read_only_fields = fields

    def get_reason(self, request: ApprovalRequest) -> str | None:
        return request.comment or None

    def get_url(self, request: ApprovalRequest) -> str:
        return request_url(request)


def latest_approval(job: JobRequest) -> dict[str, Any] | None:
    """The latest request (highest attempt); None for a job that needed none."""
    latest = (
        ApprovalRequest.objects.filter(job=job)
        .select_related("decided_by")
        .order_by("-attempt", "-created_at", "-id")
        .first()
    )
    return dict(JobApprovalSerializer(latest).data) if latest is not None else None


class GateFieldSchema(OpenApiSerializerFieldExtension):
    """The schema of jobs' ``GateField``: this serializer, or null."""

    target_class = "jobs.api.serializers.GateField"

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        component = auto_schema.resolve_serializer(JobApprovalSerializer, direction)
        return {"allOf": [component.ref], "nullable": True}
