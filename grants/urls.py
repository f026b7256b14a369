from __future__ import annotations

from rest_framework.routers import DefaultRouter

from grants import api

router = DefaultRouter()
router.trailing_slash = "/?"
router.register("quota-grants", api.QuotaGrantViewSet, basename="quota-grant")

urlpatterns = router.urls
