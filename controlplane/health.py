from __future__ import annotations

import logging

from django.db import connection
from django.http import HttpRequest, JsonResponse

log = logging.getLogger(__name__)


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness and database reachability, for load balancers and compose. The
    cause of a failure goes to the log, not to whoever asks (no sign-in here)."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception:  # any database failure means "not ready"
        log.exception("health check: the database does not answer")
        return JsonResponse({"status": "error", "database": "unreachable"}, status=503)
    return JsonResponse({"status": "ok", "database": connection.vendor})
