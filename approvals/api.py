"""Approval endpoints (``/api/v1/approvals/``): the requests a user may see, a
decision on one, and the audit history as JSON or CSV.

The views only parse and delegate: who sees what is ``approvals.access``,
the decision is ``approvals.decide`` (once, compare-and-set) and the
history rows are ``approvals.history``. A request the user may not see
answers 404, as if it did not exist; one they see but may not decide, 403 with
the rule (``not-an-approver``, ``requester-cannot-decide``)."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import django_filters as filters
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, renderers, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings

from accounts.api.hidden_objects import HiddenObjectsLogged
from accounts.api.strict_query import StrictFilterSet, StrictQuerySerializer
from accounts.models import AccessDenial
from accounts.services import record_access_denial
from approvals.access import NotAllowed, decidable_now, visible_to
from approvals.decide import submit_decision
from approvals.history import history_events, history_rows, write_csv
from approvals.models import ApprovalEvent, ApprovalRequest, ApprovalState
from queues.api.conventions import Pagination
from queues.api.fields import StrictSerializer

CSV_FILENAME = "berth-approvals-history.csv"

# --- filters -----------------------------------------------------------------------


class ApprovalFilter(StrictFilterSet):
    """What ``GET approvals/`` narrows by; ``decidable`` needs the request's user."""

    state = filters.ChoiceFilter(choices=ApprovalState.choices)
    cluster_queue = filters.CharFilter()
    team = filters.CharFilter(field_name="team__slug")
    decidable = filters.BooleanFilter(
        method="filter_decidable",
        label="only the pending requests you may decide now (false: all the others)",
    )

    class Meta:
        model = ApprovalRequest
        fields = ["state", "cluster_queue", "team", "decidable"]

    def filter_decidable(
        self, queryset: QuerySet[ApprovalRequest], name: str, value: bool | None
    ) -> QuerySet[ApprovalRequest]:
        if value is None:
            return queryset
        user = getattr(self.request, "user", None)
        mine = decidable_now(user).values("pk")
        return queryset.filter(pk__in=mine) if value else queryset.exclude(pk__in=mine)


def decidable_ids(user: Any, requests: list[ApprovalRequest]) -> set[int]:
    """Which of ``requests`` ``user`` may decide now, in one query. The same
    answer as ``check_may_decide`` on each pending one: ``decidable_by`` leaves
    out the requester and everyone who is not an approver for the request."""
    ids = [r.pk for r in requests if r.state == ApprovalState.PENDING]
    if not ids:
        return set()
    return set(decidable_now(user).filter(pk__in=ids).values_list("pk", flat=True))


# --- serializers -------------------------------------------------------------------


class ApprovalEventSerializer(serializers.ModelSerializer):
    # null: an event of the controller's own (expiry, withdrawal), or of a
    # user since deleted.
    actor: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )

    class Meta:
        model = ApprovalEvent
        fields = ["action", "actor", "at", "message"]
        read_only_fields = fields


# The list and the detail share one shape: with two schema components holding
# the state enum, drf-spectacular could only name it by a hash (and warn).
class ApprovalSerializer(serializers.ModelSerializer):
    """One request with its audit trail (oldest first); ``can_decide`` says
    whether the user asking may decide it now."""

    workload = serializers.CharField(source="workload_key", read_only=True)
    team: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    # null: a workload Berth did not submit (no requester), a request not
    # decided yet or decided by the controller (expired), or a deleted user.
    requester: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    decided_by: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    requested = serializers.JSONField(read_only=True)
    impact = serializers.JSONField(read_only=True)
    can_decide = serializers.SerializerMethodField()
    events = ApprovalEventSerializer(many=True, read_only=True)

    class Meta:
        model = ApprovalRequest
        fields = [
            "id", "state", "workload", "namespace", "cluster_queue", "local_queue", "team",
            "requester", "job", "gpus", "requested", "priority", "priority_class",
            "justification", "impact", "created_at", "expires_at", "decided_by", "decided_at",
            "comment", "applied_at", "attempt", "reapproval_of", "can_decide", "events",
        ]  # fmt: skip
        read_only_fields = fields

    def get_can_decide(self, request: ApprovalRequest) -> bool:
        decidable: set[int] | None = self.context.get("decidable")
        if decidable is None:
            decidable = decidable_ids(self.context["request"].user, [request])
        return request.pk in decidable


class DecisionPendingSerializer(ApprovalSerializer):
    """A decision stored whose effect is still to come (202): the request, and
    in ``pending`` what Berth still has to do and when. (The schema's shape of
    that answer; the view adds ``pending`` to the request's own.)"""

    pending = serializers.CharField(
        read_only=True,
        help_text="what is still pending: its write to the Workload could not be queued "
        "(the approval controller's next pass writes it), or the reservation it answered "
        "ended and a rejection stands for the next one",
    )

    class Meta(ApprovalSerializer.Meta):
        fields = [*ApprovalSerializer.Meta.fields, "pending"]
        read_only_fields = fields


class ApproveSerializer(StrictSerializer):
    # Length and blankness are the service's rules (``decide``), so the API, the
    # CLI and the dashboard refuse them under the same field and rule names.
    comment = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)


class RejectSerializer(StrictSerializer):
    reason = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        help_text="required: why it may not run (shown to the requester and on the Workload)",
    )


class HistoryQuerySerializer(StrictQuerySerializer):
    since = serializers.DateTimeField(required=False, help_text="ISO 8601; events at or after")
    until = serializers.DateTimeField(required=False, help_text="ISO 8601; events before")
    cluster_queue = serializers.CharField(required=False, allow_blank=True)
    team = serializers.CharField(required=False, allow_blank=True, help_text="a team's slug")


class HistoryRowSerializer(serializers.Serializer):
    """One audit event: the columns of the CSV export, in its order."""

    at = serializers.DateTimeField()
    approval_id = serializers.IntegerField()
    action = serializers.CharField()
    actor = serializers.CharField()
    request_state = serializers.CharField()
    workload = serializers.CharField()
    cluster_queue = serializers.CharField()
    team = serializers.CharField()
    requester = serializers.CharField()
    gpus = serializers.IntegerField()
    job_id = serializers.IntegerField(allow_null=True)
    message = serializers.CharField()


# --- CSV ---------------------------------------------------------------------------


class CSVRenderer(renderers.BaseRenderer):
    """History rows (a list of dicts) as CSV, with the columns of ``CSV_COLUMNS``."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        out = io.StringIO()
        write_csv(data or [], out)
        return out.getvalue().encode(self.charset)


# --- views -------------------------------------------------------------------------


def _refused(request: Request, refused: NotAllowed) -> Response:
    record_access_denial(
        request, reason=AccessDenial.Reason.FORBIDDEN, detail=f"{refused.rule}: {refused.message}"
    )
    return Response(
        {"detail": refused.message, "rule": refused.rule}, status=status.HTTP_403_FORBIDDEN
    )


IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    description="Any value unique to this decision (a UUID): sent again, the same decision "
    "by the same user answers as the first did instead of 409 already-decided.",
)


REFUSED = OpenApiResponse(
    description="not allowed to decide it: `rule` is `not-an-approver` or `requester-cannot-decide`"
)
CONFLICT = OpenApiResponse(
    description="`already-decided` (the detail names who decided and when), or "
    "`reservation-ended`: the quota reservation it asked about has ended and the decision "
    "cannot stand for a next one (the detail says why and what Berth does next)"
)
PENDING = OpenApiResponse(
    DecisionPendingSerializer,
    description="decided and stored, but not taking effect yet: `pending` says what is "
    "still to happen (its write could not be queued and the controller's next pass writes "
    "it; or, for a rejection, the reservation it answered ended and it stands for the next)",
)
INVALID = OpenApiResponse(description="bad input (a rejection without a reason, a long comment)")


# What approve and reject answer: decided (200), stored but pending (202), or refused.
DECISION_RESPONSES = {
    200: ApprovalSerializer,
    202: PENDING,
    400: INVALID,
    403: REFUSED,
    409: CONFLICT,
}


class ApprovalViewSet(
    HiddenObjectsLogged,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Approval requests for queues that need one (``urgent-release``), and their decisions."""

    permission_classes = [IsAuthenticated]
    filterset_class = ApprovalFilter
    ordering_fields = ["created_at", "expires_at", "gpus", "priority"]
    lookup_value_regex = "[0-9]+"

    def get_queryset(self) -> QuerySet[ApprovalRequest]:
        return (
            visible_to(self.request.user)
            .select_related("team", "requester", "decided_by")
            .prefetch_related("events__actor")
        )

    def get_serializer_class(self) -> Any:
        return ApprovalSerializer

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        queryset = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(queryset)
        rows = list(page if page is not None else queryset)
        context = {**self.get_serializer_context(), "decidable": decidable_ids(request.user, rows)}
        data = ApprovalSerializer(rows, many=True, context=context).data
        return self.get_paginated_response(data) if page is not None else Response(data)

    def _decide(self, request: Request, *, approve: bool, text: str) -> Response:
        target = self.get_object()  # 404 unless the user may see it
        key = request.headers.get(IDEMPOTENCY_KEY.name, "")
        if len(key) > 64 or not key.isprintable():
            raise ValidationError(
                {IDEMPOTENCY_KEY.name: ["at most 64 printable characters, e.g. a UUID"]}
            )
        try:
            decision = submit_decision(
                request.user, target.pk, approve=approve, comment=text, key=key
            )
        except NotAllowed as refused:
            return _refused(request, refused)
        decided = self.get_queryset().get(pk=target.pk)
        body = ApprovalSerializer(decided, context={"request": request}).data
        if decision.pending:
            # Stored, but not (yet) taking effect as asked: 202, saying what is pending.
            return Response({**body, "pending": decision.pending}, status=status.HTTP_202_ACCEPTED)
        return Response(body)

    @extend_schema(
        request=ApproveSerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses=DECISION_RESPONSES,
    )
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str | None = None, **kwargs: Any) -> Response:
        """Approve a pending request: Berth marks its admission check Ready."""
        body = ApproveSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._decide(request, approve=True, text=body.validated_data.get("comment", ""))

    @extend_schema(
        request=RejectSerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses=DECISION_RESPONSES,
    )
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str | None = None, **kwargs: Any) -> Response:
        """Reject a pending request with a reason: Berth marks its admission check
        Rejected, and Kueue deactivates the workload."""
        body = RejectSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._decide(request, approve=False, text=body.validated_data.get("reason", ""))

    @extend_schema(
        parameters=[
            HistoryQuerySerializer,
            OpenApiParameter(
                "format",
                OpenApiTypes.STR,
                enum=["json", "csv"],
                required=False,
                description="csv: every matching row as a file (not paginated); "
                "or send Accept: text/csv",
            ),
        ],
        responses={
            (200, "application/json"): HistoryRowSerializer(many=True),
            (200, "text/csv"): OpenApiTypes.STR,
        },
    )
    @action(
        detail=False,
        methods=["get"],
        renderer_classes=[*api_settings.DEFAULT_RENDERER_CLASSES, CSVRenderer],
        filter_backends=[],
    )
    def history(self, request: Request, **kwargs: Any) -> Response:
        """The audit trail of every request you may see, newest first."""
        query = HistoryQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        events = history_events(
            request.user,
            since=query.validated_data.get("since"),
            until=query.validated_data.get("until"),
            cluster_queue=query.validated_data.get("cluster_queue") or None,
            team=query.validated_data.get("team") or None,
        )
        if request.accepted_renderer.format == "csv":
            if isinstance(self.paginator, Pagination):  # page and page_size still checked
                self.paginator.check_query(request)
            return Response(
                list(history_rows(events.iterator(chunk_size=2000))),
                headers={"Content-Disposition": f'attachment; filename="{CSV_FILENAME}"'},
            )
        page = self.paginate_queryset(events)
        if page is None:
            return Response(list(history_rows(events)))
        return self.get_paginated_response(list(history_rows(page)))

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        # Only the history's rows are CSV. An error asked for as CSV (a bad
        # `since`, no token) or an OPTIONS description is answered in JSON: a
        # client reads the field and rule, not a one-cell file.
        accepted = getattr(request, "accepted_renderer", None)
        rows = isinstance(getattr(response, "data", None), list)
        if isinstance(accepted, CSVRenderer) and not rows:
            request.accepted_renderer = renderers.JSONRenderer()
            request.accepted_media_type = request.accepted_renderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)
