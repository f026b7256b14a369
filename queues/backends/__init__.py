"""Cluster backends. ``get_backend()`` is the one the settings choose
(``BERTH_CLUSTER``): ``simulated`` (embedded default) or ``kubernetes``."""

from __future__ import annotations

from functools import cache

from django.conf import settings

from queues.backends.base import ClusterBackend


@cache
def get_backend() -> ClusterBackend:
    if settings.BERTH_CLUSTER == "kubernetes":
        from queues.backends.kubernetes import KubernetesBackend

        return KubernetesBackend.from_settings(settings.BERTH_KUBE_CONTEXT)
    from queues.backends.simulated import SimulatedBackend

    return SimulatedBackend()


def configured_backend_writes_kueue_manager_config() -> bool:
    """``writes_kueue_manager_config`` of the backend the settings choose, known
    without connecting to it: request handlers (the manifests, the editor's
    plan) never talk to the cluster."""
    if settings.BERTH_CLUSTER == "kubernetes":
        from queues.backends.kubernetes import KubernetesBackend

        return KubernetesBackend.writes_kueue_manager_config
    from queues.backends.simulated import SimulatedBackend

    return SimulatedBackend.writes_kueue_manager_config
