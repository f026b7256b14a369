"""The sign-in pages: ``/login/`` with the password form and, when single
sign-on is on, the "Sign in with <provider>" button (accounts/oidc.py).

With ``BERTH_LOCAL_ACCOUNTS=false`` no page takes a password: ``/login/``
shows only the button, and ``/admin/login/`` and ``/api-auth/login/`` send the
browser to it. A password posted to any of them is refused (403), recorded in
the access log, and not checked at all: it is not a guess django-axes counts.
API tokens are not passwords and keep working.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from accounts.models import AccessDenial
from accounts.oidc import REFUSAL_SESSION_KEY
from accounts.services import record_access_denial
from accounts.sso_config import SingleSignOn

TEMPLATE = "registration/login.html"


def _safe_next(request: HttpRequest) -> str:
    candidate = request.POST.get("next") or request.GET.get("next") or ""
    if candidate and url_has_allowed_host_and_scheme(
        candidate, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return candidate
    return ""


def sign_in_context(request: HttpRequest) -> dict[str, Any]:
    """What the sign-in page shows besides the form: the provider's button
    and the message of a refused single sign-on (shown once)."""
    config: SingleSignOn | None = settings.BERTH_SSO
    next_url = _safe_next(request)
    sso_url = ""
    if config is not None:
        sso_url = reverse("oidc_authentication_init")
        if next_url:
            sso_url += "?" + urlencode({"next": next_url})
    return {
        "local_accounts": settings.BERTH_LOCAL_ACCOUNTS,
        "sso_name": config.provider_name if config is not None else "",
        "sso_url": sso_url,
        "sso_refusal": request.session.pop(REFUSAL_SESSION_KEY, ""),
        "next": next_url,
    }


def password_refused(request: HttpRequest) -> HttpResponse:
    """A password posted while local accounts are off: 403, logged, unchecked."""
    record_access_denial(
        request,
        reason=AccessDenial.Reason.LOGIN_FAILED,
        username=str(request.POST.get("username", ""))[:150],
        detail="password sign-in is turned off (BERTH_LOCAL_ACCOUNTS=false)",
    )
    context = sign_in_context(request)
    context["password_refused"] = True
    return TemplateResponse(request, TEMPLATE, context, status=403)


class LoginView(auth_views.LoginView):
    template_name = TEMPLATE

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context.update(sign_in_context(self.request))
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.BERTH_LOCAL_ACCOUNTS:
            return password_refused(request)
        return super().post(request, *args, **kwargs)


def _to_sign_in_page(request: HttpRequest, default_next: str) -> HttpResponse:
    if request.method == "POST":
        return password_refused(request)
    return redirect(
        f"{reverse(settings.LOGIN_URL)}?{urlencode({'next': _safe_next(request) or default_next})}"
    )


_api_login = auth_views.LoginView.as_view(template_name="rest_framework/login.html")


def admin_login(request: HttpRequest) -> HttpResponse:
    """``/admin/login/``: Django's admin form, or Berth's sign-in page when local
    accounts are off (the admin has no single sign-on button of its own)."""
    if settings.BERTH_LOCAL_ACCOUNTS:
        response: HttpResponse = admin.site.login(request)
        return response
    return _to_sign_in_page(request, reverse("admin:index"))


def api_login(request: HttpRequest) -> HttpResponseBase:
    """``/api-auth/login/`` (the API's browsable pages), likewise."""
    if settings.BERTH_LOCAL_ACCOUNTS:
        return _api_login(request)
    return _to_sign_in_page(request, reverse("api-docs"))
