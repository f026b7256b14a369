"""Error pages that keep the navigation and say what to do. Under /api/ the
answers stay JSON (clients parse them: queues.api.conventions)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from accounts.models import AccessDenial
from accounts.services import record_access_denial
from frontend.views.common import page


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """What does not exist, and what exists but is not the visitor's to see:
    one answer for both, so another team's pages do not show they exist."""
    if request.path.startswith("/api/"):
        # Imported here: queues.api.conventions is also DRF's parser setting, and this
        # module is the CSRF failure view Django imports while settings load.
        from queues.api import conventions as api

        return api.not_found(request, exception)
    response = page(
        request,
        "frontend/error.html",
        {
            "status": 404,
            "heading": "Nothing here",
            "message": "This page does not exist, or it belongs to a team you are not in.",
        },
        nav="",
        live=False,
    )
    response.status_code = 404
    return response


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if request.path.startswith("/api/"):
        from django.views.defaults import permission_denied as plain

        return plain(request, exception or Exception("forbidden"))
    response = page(
        request,
        "frontend/error.html",
        {
            "status": 403,
            "heading": "Not allowed",
            "message": (
                "Your account may not do this. If the form was open for a long time, "
                "reload the page and try again; otherwise ask a platform admin."
            ),
        },
        nav="",
        live=False,
    )
    response.status_code = 403
    return response


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """A form posted with a stale or missing token (CSRF_FAILURE_VIEW): refused,
    and logged like every refusal."""
    record_access_denial(
        request, reason=AccessDenial.Reason.FORBIDDEN, detail=f"CSRF check failed: {reason}"
    )
    return permission_denied(request)
