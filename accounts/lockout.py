"""Brute-force protection: failed sign-ins and refused API tokens lock out.

Sign-ins (``/login/``, ``/admin/login/``, ``/api-auth/login/``) go through
django-axes: after ``BERTH_LOGIN_FAILURE_LIMIT`` failures a username, and an
address, are locked for ``BERTH_LOGIN_LOCKOUT_MINUTES``, whatever the password
— the right one too. API tokens are not passwords axes sees, so refused tokens
are counted from the access log: ``BERTH_TOKEN_FAILURE_LIMIT`` from one address
within ``BERTH_TOKEN_LOCKOUT_MINUTES`` lock that address out of token
authentication until the oldest of them ages out of the window.

Either lockout answers 429 with ``Retry-After`` and is logged (reason
``locked-out``). A platform admin unlocks with ``manage.py unlock`` (a username
or an address) or by deleting the attempt in the admin's "Access attempts".
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from axes.signals import user_locked_out
from django.conf import settings
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from rest_framework import exceptions

from accounts.models import AccessDenial, LockoutRelease
from accounts.services import client_address, record_access_denial


def _login_message() -> str:
    minutes = settings.BERTH_LOGIN_LOCKOUT_MINUTES
    return (
        f"Too many failed sign-ins: this username or address is locked for {minutes} min. "
        "Try again later, or ask a platform admin to unlock it (manage.py unlock)."
    )


def locked_out_response(
    request: HttpRequest, original_response: Any = None, credentials: Any = None
) -> HttpResponse:
    """What axes answers a locked-out sign-in: 429 with Retry-After."""
    message = _login_message()
    response: HttpResponse
    if request.path.startswith("/api/"):
        response = JsonResponse({"detail": message, "rule": "locked-out"}, status=429)
    else:
        response = HttpResponse(message, status=429, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(settings.BERTH_LOGIN_LOCKOUT_MINUTES * 60)
    return response


@receiver(user_locked_out)
def log_lockout(
    sender: Any, request: HttpRequest, username: str | None = None, **kwargs: Any
) -> None:
    record_access_denial(
        request,
        reason=AccessDenial.Reason.LOCKED_OUT,
        username=str(username or "")[:150],
        detail=f"sign-in locked out for {settings.BERTH_LOGIN_LOCKOUT_MINUTES} min",
    )


def _refusals_since(address: str, since: datetime, limit: int) -> list[datetime]:
    """When the address's refused tokens after ``since`` were, newest first (at most ``limit``)."""
    return list(
        AccessDenial.objects.filter(
            remote_addr=address, reason=AccessDenial.Reason.BAD_CREDENTIALS, at__gt=since
        )
        .order_by("-at")
        .values_list("at", flat=True)[:limit]
    )


def refuse_locked_out_address(request: HttpRequest) -> None:
    """Raise 429 (with Retry-After) when the request's address gave
    ``BERTH_TOKEN_FAILURE_LIMIT`` refused tokens within the window, counted
    since an admin last unlocked it."""
    address = client_address(request)
    if address is None:
        return
    now = timezone.now()
    since = now - timedelta(minutes=settings.BERTH_TOKEN_LOCKOUT_MINUTES)
    limit = settings.BERTH_TOKEN_FAILURE_LIMIT
    # Every token request passes here: one indexed query while below the limit;
    # an admin's release is looked up only for an address that reached it.
    recent = _refusals_since(address, since, limit)
    if len(recent) >= limit:
        released = (
            LockoutRelease.objects.filter(remote_addr=address, at__gt=since)
            .order_by("-at")
            .values_list("at", flat=True)
            .first()
        )
        if released is not None:
            recent = _refusals_since(address, released, limit)
    if len(recent) < limit:
        return
    # Locked until the oldest counted failure leaves the window.
    wait = max(1, int((recent[-1] - since).total_seconds()) + 1)
    minutes = settings.BERTH_TOKEN_LOCKOUT_MINUTES
    detail = (
        f"{len(recent)} refused tokens from {address} within {minutes} min: token sign-in from "
        f"this address is locked; retry in {wait} s or ask a platform admin (manage.py unlock)."
    )
    record_access_denial(request, reason=AccessDenial.Reason.LOCKED_OUT, detail=detail)
    raise exceptions.Throttled(wait=wait, detail=detail)
