from __future__ import annotations

from rest_framework.routers import DefaultRouter

from accounts.api import views

router = DefaultRouter()
router.register("tokens", views.ApiTokenViewSet, basename="api-token")
router.register("access-denials", views.AccessDenialViewSet, basename="access-denial")

urlpatterns = router.urls
