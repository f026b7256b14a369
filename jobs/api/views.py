"""Job endpoints. Views parse the request and hand it to ``jobs.services``;
another team's jobs answer 404, as if they did not exist."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.hidden_objects import HiddenObjectsLogged
from accounts.api.strict_query import flag
from jobs import selectors, services
from jobs.answer_cache import cached_answer
from jobs.api.serializers import (
    JobEventSerializer,
    JobListSerializer,
    JobSerializer,
    JobSubmitSerializer,
)
from jobs.explain import explain_for
from jobs.filters import JobFilter
from jobs.models import JobRequest
from queues.access import visible_team_ids

DRY_RUN = OpenApiParameter(
    "dry_run",
    OpenApiTypes.BOOL,
    required=False,
    description="Check and render only: answers the manifest, where the job would land, "
    "whether it fits now, its queue position and estimated start. Nothing is created.",
)


LIST_DEFERRED = (
    "manifest",
    "env",
    "command",
    "labels",
    "justification",
    "message",
)


class JobViewSet(
    HiddenObjectsLogged,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Submit, follow and cancel training jobs."""

    permission_classes = [IsAuthenticated]
    filterset_class = JobFilter
    ordering_fields = ["submitted_at", "name", "state", "priority"]
    lookup_value_regex = "[0-9]+"

    def get_queryset(self) -> QuerySet[JobRequest]:
        jobs = selectors.jobs_for(self.request.user)
        if self.action == "list":
            # The list shows none of the large JSON (decoding it is most of a
            # page's cost) and needs no workload.
            jobs = jobs.select_related(None).select_related("team", "submitted_by")
            jobs = jobs.defer(*LIST_DEFERRED)
        return jobs

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """The page, built once per change of the viewer's teams' jobs (every
        reader of the same teams and URL shares it; see ``jobs.answer_cache``)."""

        def build() -> Any:
            return super(JobViewSet, self).list(request, *args, **kwargs).data

        teams = visible_team_ids(request.user)
        return Response(cached_answer("list", teams, request.build_absolute_uri(), build))

    def get_serializer_class(self) -> Any:
        if self.action == "create":
            return JobSubmitSerializer
        if self.action == "list":
            return JobListSerializer
        return JobSerializer

    @extend_schema(
        parameters=[DRY_RUN],
        request=JobSubmitSerializer,
        # 200: a dry run's answer (what would be created, and whether it fits now).
        responses={200: OpenApiTypes.OBJECT, 201: JobSerializer, 202: JobSerializer},
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = JobSubmitSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        if flag(request, "dry_run"):
            return Response(services.dry_run(request.user, data))
        job = services.submit(request.user, data)
        # Stored, but its creation could not be queued yet: 202, with the reason.
        queued = job.reason != services.QUEUE_UNAVAILABLE
        code = status.HTTP_201_CREATED if queued else status.HTTP_202_ACCEPTED
        return Response(JobSerializer(job).data, status=code)

    @extend_schema(responses={202: JobSerializer})
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Cancel: the job is deleted from the cluster; its record stays."""
        job = services.cancel(request.user, self.get_object())
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["get"])
    def explain(self, request: Request, pk: str | None = None) -> Response:
        """Why the job is pending, what is short, and the smallest change that helps."""
        return Response(explain_for(request.user, self.get_object()))

    @extend_schema(responses={200: JobEventSerializer(many=True)})
    @action(detail=True, methods=["get"], pagination_class=None)  # the whole timeline
    def events(self, request: Request, pk: str | None = None) -> Response:
        """The job's timeline: Berth's steps and its workload's transitions."""
        job = self.get_object()
        return Response(selectors.timeline(job))
