"""``GET /api/v1/gang-fit/``: the gang-fit map of every topology-aware flavor
(``?flavor=`` for one), as the Gang fit page shows it. Every signed-in user
reads it: node names and free GPUs belong to no team."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api.strict_query import StrictQuerySerializer
from cluster.gang_fit import gang_fit_maps
from queues.errors import PolicyInvalid


class GangFitQuerySerializer(StrictQuerySerializer):
    flavor = serializers.CharField(
        required=False, help_text="One flavor that names a topology (default: every one)"
    )


class GangFitView(APIView):
    """Per topology-aware flavor: the free GPUs of each node (its allocatable
    GPUs less what Kueue placed there), the largest gang of nodes x GPUs per node
    one domain of each topology level holds now, and how many free GPUs sit on
    nodes partly in use."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="gang_fit", parameters=[GangFitQuerySerializer], responses=OpenApiTypes.OBJECT
    )
    def get(self, request: Request) -> Response:
        if request.query_params.get("flavor") == "":
            # DRF reads an empty optional text parameter as absent: all flavors.
            raise PolicyInvalid.single(
                "flavor", "empty", "is empty: leave it out for every flavor's map"
            )
        query = GangFitQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        wanted = query.validated_data.get("flavor")
        maps = gang_fit_maps()
        if wanted is not None:
            names = [found.flavor for found in maps]
            if wanted not in names:
                known = (
                    f"the flavors with a gang-fit map are {', '.join(names)}"
                    if names
                    else "no flavor names a topology with nodes sync has seen"
                )
                raise PolicyInvalid.single(
                    "flavor",
                    "topology-aware-flavor",
                    f"{wanted!r} is not a flavor that names a topology; {known}",
                )
            maps = [found for found in maps if found.flavor == wanted]
        return Response({"flavors": [found.as_dict() for found in maps]})
