"""The signed-in user's page: their roles, and their API tokens (create,
revoke), which the ``berth`` CLI and scripts send as ``Authorization: Bearer``."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from accounts.models import ApiToken
from accounts.roles import is_global_approver, is_platform_admin
from accounts.services import create_token, revoke_token
from frontend.views.common import page
from queues.models import TeamMembership


@login_required
def profile(request: HttpRequest) -> HttpResponse:
    issued = None
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "token-create":
            name = (request.POST.get("token_name") or "").strip() or "web"
            issued = create_token(user=request.user, name=name[:100])
        elif action == "token-revoke":
            token = ApiToken.objects.filter(
                pk=request.POST.get("token") or 0, user_id=request.user.pk or 0
            ).first()
            if token is not None:
                revoke_token(token)
            return redirect(reverse("profile") + "#tokens")
    memberships = (
        TeamMembership.objects.filter(user_id=request.user.pk or 0)
        .select_related("team")
        .order_by("team__slug", "role")
    )
    context = {
        "is_global_approver": is_global_approver(request.user),
        "is_platform_admin": is_platform_admin(request.user),
        "memberships": memberships,
        "tokens": ApiToken.objects.filter(
            user_id=request.user.pk or 0, revoked_at__isnull=True
        ).order_by("-created_at"),
        "issued": issued,
        "server": request.build_absolute_uri("/").rstrip("/"),
    }
    return page(request, "frontend/profile.html", context, nav="profile", live=False)
