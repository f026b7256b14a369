"""``GET /api/v1/reports/usage/``: the showback report (``jobs.showback``) of a
month, grouped by team, workload type and/or flavor, as JSON or CSV.

Every signed-in user may ask; the answer holds only their teams' rows (every
team's for a platform admin). ``team`` narrows it to one team; another
team's is refused as if it did not exist, and the refusal is logged."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import renderers, serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from accounts.api.strict_query import StrictQuerySerializer
from jobs.showback import (
    DIMENSIONS,
    parse_group_by,
    parse_month,
    report_dict,
    usage_report,
    visible_team_slugs,
    write_csv,
)
from queues.errors import FieldError, HiddenRefusal, PolicyInvalid
from queues.models import Team

CSV_FILENAME = "berth-usage-{month}.csv"


class UsageQuerySerializer(StrictQuerySerializer):
    month = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="A UTC calendar month, YYYY-MM (default: this month)",
    )
    group_by = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text=f"Any of {', '.join(DIMENSIONS)}, comma-separated, each once, in the order "
        "rows are grouped (default: team)",
    )
    team = serializers.CharField(
        required=False, allow_blank=True, help_text="Only this team's rows (a slug)"
    )


class CounterpartSerializer(serializers.Serializer):
    team = serializers.CharField(help_text='a team\'s slug; "" for shared queues')
    gpu_hours = serializers.FloatField()


class FiguresSerializer(serializers.Serializer):
    allocated_gpu_hours = serializers.FloatField(
        help_text="GPU-hours Kueue held (quota reserved or admitted × GPUs)"
    )
    busy_gpu_hours = serializers.FloatField(
        allow_null=True, help_text="GPU-hours really busy (DCGM); null when never measured"
    )
    measured_gpu_hours = serializers.FloatField(
        help_text="of the allocated GPU-hours, those whose use was measured"
    )
    lost_gpu_hours = serializers.FloatField(
        help_text="GPU-hours of work lost to preemption, since the last checkpoint"
    )
    unpriced_gpu_hours = serializers.FloatField(
        help_text="allocated GPU-hours on flavors without a price then (not in cost)"
    )
    cost = serializers.CharField(
        allow_null=True, help_text="allocated hours at the price in force, to the cent"
    )
    lost_cost = serializers.CharField(allow_null=True)
    borrowed_gpu_hours = serializers.FloatField(
        allow_null=True, help_text="null when grouped by type (borrowing is a queue's)"
    )
    lent_gpu_hours = serializers.FloatField(allow_null=True)
    borrowed_from = CounterpartSerializer(
        many=True,
        allow_null=True,
        help_text="the five largest lenders; listed when the report covers at most 10 teams "
        "(a member's, or team=), else null; null too when grouped by type",
    )
    lent_to = CounterpartSerializer(many=True, allow_null=True)


class UsageRowSerializer(FiguresSerializer):
    team = serializers.CharField(required=False, help_text='"" for namespaces no team owns')
    type = serializers.CharField(required=False, help_text="workload.ai/type")
    flavor = serializers.CharField(required=False)


class UsageReportSerializer(serializers.Serializer):
    month = serializers.CharField()
    # "from" is a keyword: declared by name below.
    to = serializers.DateTimeField()
    group_by = serializers.ListField(child=serializers.ChoiceField(choices=DIMENSIONS))
    currency = serializers.CharField(help_text="BERTH_CURRENCY, ISO 4217")
    as_of = serializers.DateTimeField(
        allow_null=True, help_text="the last snapshot the figures count to"
    )
    busy_source = serializers.CharField(help_text="prometheus, simulated or empty")
    rows = UsageRowSerializer(many=True)
    totals = FiguresSerializer()

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        return {"month": fields.pop("month"), "from": serializers.DateTimeField(), **fields}


class UsageCSVRenderer(renderers.BaseRenderer):
    """The report's rows as CSV (``jobs.showback.write_csv``)."""

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
        write_csv(data, out)
        return out.getvalue().encode(self.charset)


def _team(request: Request, slug: str | None) -> list[str] | None:
    """The one team asked for, if the user may see it; None for all theirs."""
    if slug is None:
        return None
    visible = visible_team_slugs(request.user)
    if visible is None or slug in visible:
        if visible is None and not Team.objects.filter(slug=slug).exists():
            raise PolicyInvalid.single("team", "unknown-team", f"there is no team named {slug!r}")
        return [slug]
    unknown = FieldError("team", "unknown-team", f"you are not a member of a team named {slug!r}")
    if not Team.objects.filter(slug=slug).exists():
        raise PolicyInvalid([unknown])
    raise HiddenRefusal(unknown, f"usage report of team {slug}: not a member")


class UsageReportView(APIView):
    """A month's showback: GPU-hours allocated, busy and lost to preemption,
    their cost at each flavor's price in force, and borrowing between teams."""

    permission_classes = [IsAuthenticated]
    renderer_classes = [*api_settings.DEFAULT_RENDERER_CLASSES, UsageCSVRenderer]  # type: ignore[list-item]

    @extend_schema(
        operation_id="usage_report",
        parameters=[
            UsageQuerySerializer,
            OpenApiParameter(
                "month",
                OpenApiTypes.STR,
                pattern=r"^[0-9]{4}-[0-9]{2}$",
                required=False,
                description="A UTC calendar month, YYYY-MM (default: this month)",
            ),
            OpenApiParameter(
                "format",
                OpenApiTypes.STR,
                enum=["json", "csv"],
                required=False,
                description="csv: the rows as a file; or send Accept: text/csv",
            ),
        ],
        responses={
            (200, "application/json"): UsageReportSerializer,
            (200, "text/csv"): OpenApiTypes.STR,
        },
    )
    def get(self, request: Request) -> Response:
        query = UsageQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        values = query.validated_data
        month, month_errors = parse_month(values.get("month"), timezone.now())
        group_by, group_errors = parse_group_by(values.get("group_by"))
        team = values.get("team")
        if team == "":
            month_errors.append(
                FieldError("team", "empty", "is empty: leave it out for all your teams")
            )
        if month_errors or group_errors or month is None:
            raise PolicyInvalid(month_errors + group_errors)
        report = usage_report(request.user, month, group_by, teams=_team(request, team))
        answer = report_dict(report)
        if request.accepted_renderer.format == "csv":
            name = CSV_FILENAME.format(month=month.label)
            return Response(
                answer, headers={"Content-Disposition": f'attachment; filename="{name}"'}
            )
        return Response(answer)

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        # Only the report is CSV: an error asked for as CSV (a bad month, no
        # token) is answered in JSON, so a client reads its field and rule.
        accepted = getattr(request, "accepted_renderer", None)
        report = isinstance(getattr(response, "data", None), dict) and "rows" in response.data
        if isinstance(accepted, UsageCSVRenderer) and not report:
            request.accepted_renderer = renderers.JSONRenderer()
            request.accepted_media_type = request.accepted_renderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)
