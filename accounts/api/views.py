from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from accounts import services
from accounts.api.hidden_objects import HiddenObjectsLogged
from accounts.api.moments import UtcDateTimeFilter
from accounts.api.serializers import (
    AccessDenialSerializer,
    ApiTokenSerializer,
    IssuedApiTokenSerializer,
    NewApiTokenSerializer,
)
from accounts.api.strict_query import StrictFilterSet
from accounts.models import AccessDenial, ApiToken
from accounts.permissions import PlatformAdminOnly


class ApiTokenViewSet(
    HiddenObjectsLogged,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Your own API tokens. Other people's tokens do not exist for you (404)."""

    serializer_class = ApiTokenSerializer
    lookup_value_regex = "[0-9]+"

    def get_queryset(self) -> QuerySet[ApiToken]:
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return ApiToken.objects.none()
        user: Any = self.request.user  # authenticated: the default permission
        return ApiToken.objects.filter(user=user)

    @extend_schema(request=NewApiTokenSerializer, responses={201: IssuedApiTokenSerializer})
    def create(self, request: Request) -> Response:
        form = NewApiTokenSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        parent = request.auth if isinstance(request.auth, ApiToken) else None
        issued = services.create_token(user=request.user, parent=parent, **form.validated_data)
        data = dict(IssuedApiTokenSerializer(issued.token).data)
        data["token"] = issued.secret
        return Response(data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Revoke the token. Revoking twice is harmless."""
        services.revoke_token(self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class AccessDenialFilter(StrictFilterSet):
    since = UtcDateTimeFilter(field_name="at", lookup_expr="gte")
    until = UtcDateTimeFilter(field_name="at", lookup_expr="lt")

    class Meta:
        model = AccessDenial
        fields = ["username", "reason", "since", "until"]


class AccessDenialViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """Refused attempts: failed logins, bad tokens, forbidden actions (admins only)."""

    serializer_class = AccessDenialSerializer
    permission_classes = [PlatformAdminOnly]
    filterset_class = AccessDenialFilter
    ordering_fields = ["at"]
    queryset = AccessDenial.objects.all()
