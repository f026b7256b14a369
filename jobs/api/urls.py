from __future__ import annotations

from rest_framework.routers import DefaultRouter

from jobs.api import queues, views

# The trailing slash is optional: `jobs/7/explain` as well as `jobs/7/explain/`.
router = DefaultRouter()
router.trailing_slash = "/?"
router.register("jobs/queues", queues.SubmitQueueViewSet, basename="submit-queue")
router.register("jobs", views.JobViewSet, basename="job")

urlpatterns = router.urls
