from __future__ import annotations

from django.apps import AppConfig


class ClusterConfig(AppConfig):
    """What the cluster does, observed: sync, snapshots, rollups, utilisation,
    stats, forecasts and /metrics."""

    name = "cluster"
    verbose_name = "Cluster"

    def ready(self) -> None:
        # Registers its Celery tasks in every process (web too): services
        # queue them by name (queues.deferred).
        from cluster import tasks  # noqa: F401
