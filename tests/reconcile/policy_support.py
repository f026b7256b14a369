"""The small policy most reconcile tests start from, and what the simulated
cluster holds of a kind."""

from __future__ import annotations

from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from tests.factories import cluster_queue, cohort, flavor, gpu_groups, team


def small_policy(*, urgent: bool) -> None:
    """One H100 flavor, cohort ``org``, team ``research`` with its queue (8 GPUs,
    borrowing up to 4) and, if ``urgent``, a shared ``urgent-release`` queue."""
    flavor("h100")
    cohort("org")
    team("research")
    cluster_queue(
        "research",
        team="research",
        cohort="org",
        resource_groups=gpu_groups("h100", "8", borrowing_limit="4"),
    )
    if urgent:
        cluster_queue(
            "urgent",
            cohort="org",
            queue_class="urgent-release",
            resource_groups=gpu_groups("h100", "4"),
        )


def on_cluster(kind: str) -> set[str]:
    return {o["metadata"]["name"] for o in SimulatedBackend().list(TYPES[kind])[0]}
