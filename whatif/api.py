"""Capacity plans over the API (``/api/v1/plans/capacity/``), platform admins
only: POST asks for a plan (checked at once; 400 naming every field at fault,
nothing stored), GET lists the recent plans, GET ``<id>/`` follows one (its
state and progress while the worker searches, its answers when done). The
view only parses and delegates to ``whatif.capacity``."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import ParseError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.permissions import PlatformAdminOnly
from whatif.capacity import create_plan
from whatif.models import CapacityPlan

RECENT = 20


def plan_json(plan: CapacityPlan) -> dict[str, Any]:
    """A plan as the API and the CLI read it."""
    return {
        "id": plan.pk,
        "url": f"/api/v1/plans/capacity/{plan.pk}/",
        "page": f"/capacity/{plan.pk}/",
        "state": plan.state,
        "progress": plan.progress,
        "source": plan.source,
        "window_start": plan.window_start.isoformat() if plan.window_start else None,
        "window_end": plan.window_end.isoformat() if plan.window_end else None,
        "targets": plan.request.get("targets", []),
        "flavors": plan.request.get("flavors", []),
        "seeds": plan.request.get("seeds"),
        "growth": plan.request.get("growth"),
        "workloads": plan.workloads,
        "policy_version": plan.policy_version,
        "created_by": plan.created_by.get_username() if plan.created_by else None,
        "created_at": plan.created_at.isoformat(),
        "started_at": plan.started_at.isoformat() if plan.started_at else None,
        "finished_at": plan.finished_at.isoformat() if plan.finished_at else None,
        "error": plan.error,
        "result": plan.result or None,
    }


class CapacityPlanList(APIView):
    permission_classes = [PlatformAdminOnly]

    @extend_schema(operation_id="capacity_plans_list", responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        plans = CapacityPlan.objects.select_related("created_by").defer("replay_inputs")[:RECENT]
        return Response({"results": [plan_json(plan) for plan in plans]})

    @extend_schema(
        operation_id="capacity_plans_create",
        request=OpenApiTypes.OBJECT,
        responses={202: OpenApiTypes.OBJECT},
    )
    def post(self, request: Request) -> Response:
        if not isinstance(request.data, dict):
            raise ParseError("the body must be a JSON object")
        plan = create_plan(request.user, request.data)
        return Response(plan_json(plan), status=status.HTTP_202_ACCEPTED)


class CapacityPlanDetail(APIView):
    permission_classes = [PlatformAdminOnly]

    @extend_schema(operation_id="capacity_plans_retrieve", responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> Response:
        plan = get_object_or_404(
            CapacityPlan.objects.select_related("created_by").defer("replay_inputs"), pk=pk
        )
        return Response(plan_json(plan))
