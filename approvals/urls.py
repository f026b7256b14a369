from __future__ import annotations

from rest_framework.routers import DefaultRouter

from approvals import api

router = DefaultRouter()
router.trailing_slash = "/?"
router.register("approvals", api.ApprovalViewSet, basename="approval")

urlpatterns = router.urls
