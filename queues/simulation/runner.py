"""Driving the simulated cluster: one ``step`` is Kueue's work since the last
step plus the demo load. The embedded loop (controlplane.embedded) and, with a broker,
Celery beat both call it."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from queues.backends import get_backend
from queues.backends.simulated import SimulatedBackend
from queues.locks import try_lock
from queues.models import SimulatedClock
from queues.simulation.kueue import SimulatedKueue, TickResult
from queues.simulation.load import generate
from queues.simulation.nodes import ensure_nodes

log = logging.getLogger(__name__)


TICK_LOCK = "berth.simulated-tick"
# Real seconds of load one step makes up for at most, after a pause.
MAX_LOAD_GAP = 60.0


@dataclass
class StepReport:
    now: float
    tick: TickResult
    jobs_created: int
    nodes_created: int


def step(*, load: bool | None = None, now: float | None = None) -> StepReport | None:
    """Advance the simulated cluster to now. None when the cluster is not the
    simulated one, or another process is stepping it right now (a second tick
    at the same moment would have nothing to add)."""
    backend = get_backend()
    if not isinstance(backend, SimulatedBackend):
        return None
    with try_lock(TICK_LOCK) as taken:
        if not taken:
            return None
        now = time.time() if now is None else now
        speedup = float(settings.BERTH_SIMULATED_SPEEDUP)
        with transaction.atomic():
            clock, _ = SimulatedClock.objects.select_for_update().get_or_create(pk=1)
            last = clock.last_tick if clock.last_tick is not None else now
            elapsed = max(0.0, now - last)
            clock.last_tick = now
            clock.save(update_fields=["last_tick"])
        nodes = ensure_nodes(backend)
        # The garbage collector: what lost its owner (a Workload whose job was
        # deleted before deletes cascaded) goes before Kueue looks at it.
        backend.collect_garbage()
        created = 0
        if settings.BERTH_DEMO_LOAD if load is None else load:
            # Bounded, so a long pause does not bring an hour of jobs at once.
            created = generate(backend, now, min(elapsed, MAX_LOAD_GAP) * speedup)
        tick = SimulatedKueue(backend, speedup).tick(now)
        # The change log is what watches replay; a watcher that falls further
        # behind than it keeps relists (410 Gone), as on a real cluster.
        backend.prune_log()
        return StepReport(now, tick, created, nodes)
