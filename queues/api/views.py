"""Policy endpoints. Views only parse the request and hand it to a service."""

from __future__ import annotations

import re
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import AccessDenial
from accounts.services import record_access_denial
from queues import filters, selectors, services
from queues.access import may_change_policy
from queues.api import serializers
from queues.api.permissions import ReadPolicyOrAdminWrites
from queues.errors import PolicyInvalid
from queues.models import Team
from queues.services.kinds import PolicyKindService

_IF_MATCH = re.compile(r'^\s*(?:W/)?"?(\d+)"?\s*$')

IF_MATCH = OpenApiParameter(
    "If-Match",
    location=OpenApiParameter.HEADER,
    required=False,
    description="The revision you edited (from GET's ETag or `revision`); a newer stored "
    "revision answers 412 instead of overwriting someone else's change.",
)


def expected_revision(request: Request) -> int | None:
    header = request.headers.get("If-Match")
    if header is None or header.strip() == "*":
        return None
    match = _IF_MATCH.match(header)
    if not match:
        raise PolicyInvalid.single("If-Match", "format", 'must be the revision number, e.g. "3"')
    return int(match.group(1))


class PolicyViewSet(viewsets.ModelViewSet):
    """CRUD for one policy kind through its service."""

    service: PolicyKindService[Any]
    permission_classes = [ReadPolicyOrAdminWrites]
    lookup_field = "name"
    # Only characters a Kubernetes name can have: anything else (NUL bytes, say)
    # is a 404 from the URL resolver instead of an error from the database.
    lookup_value_regex = "[A-Za-z0-9._-]+"

    def _respond(self, obj: Any, code: int = status.HTTP_200_OK) -> Response:
        data = self.get_serializer(obj).data
        return Response(data, status=code, headers={"ETag": f'"{obj.revision}"'})

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self._respond(self.get_object())

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        obj = self.service.create(actor=request.user, data=serializer.validated_data)
        return self._respond(self.get_queryset().get(pk=obj.pk), status.HTTP_201_CREATED)

    @extend_schema(parameters=[IF_MATCH])
    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """PUT replaces the object (fields left out return to their defaults);
        PATCH changes only the fields sent."""
        partial = kwargs.pop("partial", False)
        obj = self.get_object()
        serializer = self.get_serializer(obj, data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        obj = self.service.update(
            actor=request.user,
            obj=obj,
            data=serializer.validated_data,
            expected_revision=expected_revision(request),
            replace=not partial,
        )
        return self._respond(self.get_queryset().get(pk=obj.pk))

    @extend_schema(parameters=[IF_MATCH])
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self.update(request, *args, partial=True, **kwargs)

    @extend_schema(parameters=[IF_MATCH])
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        self.service.delete(
            actor=request.user, obj=self.get_object(), expected_revision=expected_revision(request)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class TeamViewSet(PolicyViewSet):
    """Teams and the namespaces they own. Members are private to the team:
    ``/teams/{slug}/members/`` answers 404 to everyone else."""

    serializer_class = serializers.TeamSerializer
    service = services.teams
    lookup_field = "slug"
    filterset_class = filters.TeamFilter
    ordering_fields = ["slug", "name", "created_at"]

    queryset = selectors.teams()

    def _private_team(self, request: Request, slug: str) -> Team:
        team = selectors.private_teams_for(request.user).filter(slug=slug).first()
        if team is None:
            if Team.objects.filter(slug=slug).exists():
                record_access_denial(
                    request,
                    reason=AccessDenial.Reason.FORBIDDEN,
                    detail=f"members of team {slug} are private to the team",
                )
            raise NotFound("No such team.")
        return team

    def _members(self, team: Team) -> Response:
        rows = [
            {"username": m.user.get_username(), "role": m.role}
            for m in selectors.memberships_of(team)
        ]
        return Response({"team": team.slug, "members": rows})

    @extend_schema(
        request=serializers.MembershipSerializer,
        responses={200: serializers.TeamMembersSerializer, 201: serializers.TeamMembersSerializer},
    )
    # Privacy first: outsiders get 404 before the admin check can answer 403.
    @action(
        detail=True,
        methods=["get", "post"],
        url_path="members",
        permission_classes=[IsAuthenticated],
        pagination_class=None,
        filter_backends=[],
    )
    def members(self, request: Request, slug: str) -> Response:
        team = self._private_team(request, slug)
        if request.method == "GET":
            return self._members(team)
        if not may_change_policy(request.user):
            raise PermissionDenied("Only platform admins change team membership.")
        serializer = serializers.MembershipSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        changed = services.set_membership(
            actor=request.user, team=team, present=True, **serializer.validated_data
        )
        response = self._members(team)
        response.status_code = status.HTTP_201_CREATED if changed else status.HTTP_200_OK
        return response

    @extend_schema(
        parameters=[OpenApiParameter("role", required=False, enum=["member", "approver"])],
        responses={204: None},
    )
    @action(
        detail=True,
        methods=["delete"],
        url_path=r"members/(?P<username>[\w.@+-]+)",
        permission_classes=[IsAuthenticated],
        pagination_class=None,
        filter_backends=[],
    )
    def remove_member(self, request: Request, slug: str, username: str) -> Response:
        team = self._private_team(request, slug)
        if not may_change_policy(request.user):
            raise PermissionDenied("Only platform admins change team membership.")
        services.set_membership(
            actor=request.user,
            team=team,
            username=username,
            role=request.query_params.get("role", "member"),
            present=False,
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class TopologyViewSet(PolicyViewSet):
    """Kueue Topologies: the node-label levels (block, rack, host) that a
    flavor naming one (``topology_name``) places pods by. The levels cannot
    change once created; a topology a flavor names cannot be deleted."""

    serializer_class = serializers.TopologySerializer
    service = services.topologies
    filterset_class = filters.TopologyFilter
    ordering_fields = ["name", "created_at"]

    queryset = selectors.topologies()


class ResourceFlavorViewSet(PolicyViewSet):
    serializer_class = serializers.ResourceFlavorSerializer
    service = services.resource_flavors
    filterset_class = filters.ResourceFlavorFilter
    ordering_fields = ["name", "created_at"]

    queryset = selectors.resource_flavors()


class CohortViewSet(PolicyViewSet):
    serializer_class = serializers.CohortSerializer
    service = services.cohorts
    filterset_class = filters.CohortFilter
    ordering_fields = ["name", "created_at"]

    queryset = selectors.cohorts()


class ClusterQueueViewSet(PolicyViewSet):
    serializer_class = serializers.ClusterQueueSerializer
    service = services.cluster_queues
    filterset_class = filters.ClusterQueueFilter
    ordering_fields = ["name", "created_at"]

    queryset = selectors.cluster_queues()


class LocalQueueViewSet(PolicyViewSet):
    serializer_class = serializers.LocalQueueSerializer
    service = services.local_queues
    lookup_field = "pk"
    lookup_url_kwarg = "id"
    lookup_value_regex = "[0-9]+"
    filterset_class = filters.LocalQueueFilter
    ordering_fields = ["namespace__name", "name", "created_at"]

    queryset = selectors.local_queues()


class PriorityClassViewSet(PolicyViewSet):
    serializer_class = serializers.PriorityClassSerializer
    service = services.priority_classes
    filterset_class = filters.PriorityClassFilter
    ordering_fields = ["name", "value"]

    queryset = selectors.priority_classes()


class QueueClassViewSet(PolicyViewSet):
    serializer_class = serializers.QueueClassSerializer
    service = services.queue_classes
    filterset_class = filters.QueueClassFilter
    ordering_fields = ["name"]

    queryset = selectors.queue_classes()


class PolicyHistoryViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Every policy change: who, when, before and after. Membership changes are
    visible to the team and to admins only."""

    serializer_class = serializers.PolicyChangeSerializer
    lookup_value_regex = "[0-9]+"
    filterset_class = filters.PolicyChangeFilter
    ordering_fields = ["at"]

    def get_queryset(self) -> QuerySet[Any]:
        return selectors.history_for(self.request.user)
