"""How the cluster Berth drives does work, for everything that plays it
forward (start estimates, what-if replays).

A real cluster runs a job for its declared time, keeps a victim's quota while
its job stops, and Kueue queues parked workloads again about a second after
capacity frees (its batched requeue). The simulated cluster does
BERTH_SIMULATED_SPEEDUP seconds of a job's declared runtime per second, and
its Kueue, rebuilt at every step, frees a victim's quota in the step that
evicts it and weighs every pending workload again in the step capacity frees.
"""

from __future__ import annotations

from typing import NamedTuple

from django.conf import settings

# A victim's quota stays taken this long while its job stops (a real cluster).
EVICTION_DELAY_SECONDS = 30.0
# Kueue queues parked workloads again a second after capacity frees (batched).
REQUEUE_DELAY_SECONDS = 1.0


class Pace(NamedTuple):
    speedup: float
    eviction_delay: float
    requeue_delay: float
    # The longest an approval keeps a reservation waiting (then it expires).
    approval_timeout: float = 0.0

    def wall(self, work_seconds: float) -> float:
        """How long ``work_seconds`` of declared runtime takes on this cluster."""
        return work_seconds / self.speedup


def cluster_pace() -> Pace:
    timeout = float(settings.BERTH_APPROVAL_TIMEOUT)
    if settings.BERTH_CLUSTER == "simulated":
        return Pace(float(settings.BERTH_SIMULATED_SPEEDUP), 0.0, 0.0, timeout)
    return Pace(1.0, EVICTION_DELAY_SECONDS, REQUEUE_DELAY_SECONDS, timeout)
