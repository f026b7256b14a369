"""The policy as the cluster sees it: rendered manifests, the plan, reconcile runs.

Handlers read Postgres only; anything that needs the cluster is a task they
enqueue (in the embedded mode tasks run in-process)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.permissions import PlatformAdminOnly
from queues.api.error_schema import ErrorSerializer
from queues.kueue.render import to_yaml_documents
from queues.models import ReconcileRun
from queues.reconcile import manifest_objects, policy_version
from queues.tasks import plan_policy, reconcile_policy


def _finished_run(result: Any) -> ReconcileRun | None:
    """The run a task produced, if it has finished (always, in embedded mode)."""
    if not result.ready() or not isinstance(result.result, int):
        return None
    return ReconcileRun.objects.filter(pk=result.result).first()


class ReconcileRunSerializer(serializers.ModelSerializer):
    class Meta:
        model = ReconcileRun
        fields = [
            "id",
            "started_at",
            "finished_at",
            "status",
            "trigger",
            "backend",
            "dry_run",
            "policy_version",
            "created",
            "updated",
            "deleted",
            "drained",
            "unchanged",
            "drifted",
            "write_calls",
            "retries",
            "changes",
            "errors",
            "message",
        ]
        read_only_fields = fields


class ReconcileRunViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Every reconcile (and plan) run: what it found, changed and failed to do."""

    serializer_class = ReconcileRunSerializer
    queryset = ReconcileRun.objects.all()
    filterset_fields = ["status", "trigger", "dry_run"]
    ordering_fields = ["started_at"]


class YamlDocumentsRenderer(BaseRenderer):
    """A list of objects as multi-document YAML (what ``kubectl apply -f`` reads);
    anything else (an error body) as one YAML document."""

    media_type = "application/yaml"
    format = "yaml"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        if isinstance(data, list):
            return to_yaml_documents(data).encode()
        # Error bodies hold DRF's str subclasses: make them plain JSON types first.
        plain = json.loads(JSONRenderer().render(data))
        return yaml.safe_dump(plain, sort_keys=False).encode()


class ManifestsView(APIView):
    """The whole rendered bundle: ``application/yaml`` (multi-document) by
    default, JSON with ``Accept: application/json`` or ``?format=json``.

    On a real cluster Kueue's manager ConfigMap is a manual step: in JSON it
    carries the annotation ``berth.dev/manual-step`` saying what to do, in YAML
    it is written as comments (so ``kubectl apply -f`` never overwrites Kueue's
    own ConfigMap)."""

    permission_classes = [IsAuthenticated]
    renderer_classes = [YamlDocumentsRenderer, JSONRenderer]

    @extend_schema(
        responses={
            (200, "application/yaml"): list[dict[str, Any]],
            (200, "application/json"): list[dict[str, Any]],
        }
    )
    def get(self, request: Request) -> Response:
        return Response(manifest_objects())


class PlanView(APIView):
    """GET: the latest plan (what a reconcile would change) and whether the
    policy changed since. POST (admins): compute a fresh one."""

    def get_permissions(self) -> list[Any]:
        return [PlatformAdminOnly()] if self.request.method == "POST" else [IsAuthenticated()]

    @extend_schema(responses={200: ReconcileRunSerializer, 404: ErrorSerializer})
    def get(self, request: Request) -> Response:
        latest = (
            ReconcileRun.objects.filter(dry_run=True)
            .exclude(status=ReconcileRun.Status.SKIPPED)
            .first()
        )
        if latest is None:
            return Response(
                {"detail": "No plan yet: POST to compute one."}, status=status.HTTP_404_NOT_FOUND
            )
        data = dict(ReconcileRunSerializer(latest).data)
        data["stale"] = latest.policy_version < policy_version()
        return Response(data)

    @extend_schema(request=None, responses={202: ReconcileRunSerializer})
    def post(self, request: Request) -> Response:
        run = _finished_run(plan_policy.delay())
        body = dict(ReconcileRunSerializer(run).data) if run else {"detail": "planning"}
        return Response(body, status=status.HTTP_202_ACCEPTED)


class ReconcileView(APIView):
    """POST (admins): reconcile now rather than at the next periodic run."""

    permission_classes = [PlatformAdminOnly]

    @extend_schema(request=None, responses={202: ReconcileRunSerializer})
    def post(self, request: Request) -> Response:
        run = _finished_run(reconcile_policy.delay(ReconcileRun.Trigger.MANUAL))
        body = dict(ReconcileRunSerializer(run).data) if run else {"detail": "reconciling"}
        return Response(body, status=status.HTTP_202_ACCEPTED)
