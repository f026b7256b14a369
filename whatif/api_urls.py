"""``/api/v1/plans/capacity/``: included from controlplane/urls.py."""

from __future__ import annotations

from django.urls import path

from whatif.api import CapacityPlanDetail, CapacityPlanList

urlpatterns = [
    path("", CapacityPlanList.as_view(), name="api-capacity-plans"),
    path("<int:pk>/", CapacityPlanDetail.as_view(), name="api-capacity-plan"),
]
