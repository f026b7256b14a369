"""``/api/v1/me/``: who the caller is to Berth (roles and teams)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.roles import is_global_approver, is_platform_admin
from queues.models import TeamMembership


class MyTeamRoleSerializer(serializers.Serializer):
    team = serializers.CharField()
    role = serializers.CharField()


class MeSerializer(serializers.Serializer):
    username = serializers.CharField()
    is_platform_admin = serializers.BooleanField()
    is_global_approver = serializers.BooleanField()
    teams = MyTeamRoleSerializer(many=True)


class MeView(APIView):
    """Who you are to Berth: roles and teams."""

    @extend_schema(responses=MeSerializer)
    def get(self, request: Request) -> Response:
        user: Any = request.user  # authenticated: the default permission is IsAuthenticated
        teams = (
            TeamMembership.objects.filter(user=user)
            .select_related("team")
            .order_by("team__slug", "role")
        )
        return Response(
            MeSerializer(
                {
                    "username": request.user.get_username(),
                    "is_platform_admin": is_platform_admin(request.user),
                    "is_global_approver": is_global_approver(request.user),
                    "teams": [{"team": m.team.slug, "role": m.role} for m in teams],
                }
            ).data
        )
