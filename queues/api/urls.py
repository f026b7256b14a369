from __future__ import annotations

from django.urls import path
from rest_framework.routers import DefaultRouter

from queues.api import cluster, kueue_configuration, me, views

router = DefaultRouter()
router.register("teams", views.TeamViewSet, basename="team")
router.register("topologies", views.TopologyViewSet, basename="topology")
router.register("resource-flavors", views.ResourceFlavorViewSet, basename="resource-flavor")
router.register("cohorts", views.CohortViewSet, basename="cohort")
router.register("cluster-queues", views.ClusterQueueViewSet, basename="cluster-queue")
router.register("local-queues", views.LocalQueueViewSet, basename="local-queue")
router.register("priority-classes", views.PriorityClassViewSet, basename="priority-class")
router.register("queue-classes", views.QueueClassViewSet, basename="queue-class")
router.register("policy/history", views.PolicyHistoryViewSet, basename="policy-change")
router.register("policy/reconcile-runs", cluster.ReconcileRunViewSet, basename="reconcile-run")

urlpatterns = [
    path("me/", me.MeView.as_view(), name="me"),
    path(
        "policy/kueue-configuration/",
        kueue_configuration.KueueConfigurationView.as_view(),
        name="policy-kueue-configuration",
    ),
    path("policy/manifests/", cluster.ManifestsView.as_view(), name="policy-manifests"),
    path("policy/plan/", cluster.PlanView.as_view(), name="policy-plan"),
    path("policy/reconcile/", cluster.ReconcileView.as_view(), name="policy-reconcile"),
    *router.urls,
]
