from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from accounts import oidc
from accounts import views as sign_in
from cluster.gang_fit_api import GangFitView
from controlplane import health
from controlplane.metrics import metrics_view
from jobs.api.reports import UsageReportView

admin.site.site_header = "Berth administration"
admin.site.site_title = "Berth"
admin.site.index_title = "Policy, people and audit"

urlpatterns = [
    path("", include("frontend.urls")),
    path("login/", sign_in.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Single sign-on (accounts/oidc.py, docs/sso.md); 404 while it is off. The
    # redirect URI to register at the provider is <Berth's address>/oidc/callback/.
    path("oidc/authenticate/", oidc.SingleSignOnStart.as_view(), name=oidc.START_URL_NAME),
    path("oidc/callback/", oidc.SingleSignOnCallback.as_view(), name=oidc.CALLBACK_URL_NAME),
    # Before admin/ and api-auth/: with local accounts off they take no password.
    path("admin/login/", sign_in.admin_login),
    path("api-auth/login/", sign_in.api_login),
    path("admin/", admin.site.urls),
    path("api/v1/", include("queues.api.urls")),
    path("api/v1/", include("accounts.api.urls")),
    path("api/v1/", include("jobs.api.urls")),
    path("api/v1/", include("approvals.urls")),
    path("api/v1/", include("grants.urls")),
    path("api/v1/reports/usage/", UsageReportView.as_view(), name="usage-report"),
    path("api/v1/gang-fit/", GangFitView.as_view(), name="gang-fit-map"),
    path("api/v1/plans/capacity/", include("whatif.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    path("api-auth/", include("rest_framework.urls")),
    path("healthz", health.healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
]

handler404 = "frontend.views.errors.not_found"
handler403 = "frontend.views.errors.permission_denied"
handler500 = "queues.api.conventions.server_error"
