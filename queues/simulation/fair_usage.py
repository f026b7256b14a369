"""Admission fair sharing on the simulated cluster: each LocalQueue's decayed
usage lives in its status, as Kueue keeps it
(``status.fairSharing.admissionFairSharingStatus``: ``consumedResources`` and
``lastUpdate``), so the order survives from one step to the next; a step
samples it again once the sampling interval has passed."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from queues.engine.admission_fairness import consumed_from_status
from queues.engine.scheduler import Scheduler
from queues.simulation.annotations import epoch
from queues.simulation.job_kinds import iso

STATUS = "admissionFairSharingStatus"


def load_usage(backend: SimulatedBackend, scheduler: Scheduler, now: float) -> None:
    """Seed the scheduler's ledger from the LocalQueues' statuses."""
    ledger = scheduler.ledger
    if ledger is None:
        return
    # Never sampled yet: as if the last sample were one interval ago, so this
    # step starts the record.
    oldest = now - ledger.config.sampling_interval
    seen = False
    for queue in backend.list(TYPES["LocalQueue"])[0]:
        saved = ((queue.get("status") or {}).get("fairSharing") or {}).get(STATUS) or {}
        if not saved:
            continue
        key = f"{queue['metadata']['namespace']}/{queue['metadata']['name']}"
        ledger.consumed[key] = consumed_from_status(saved)
        saved_at = epoch(saved.get("lastUpdate"), now)
        oldest = saved_at if not seen else min(oldest, saved_at)
        seen = True
    ledger.last_sample = oldest


def sample_usage(
    backend: SimulatedBackend,
    write: Callable[[dict[str, Any]], None],
    scheduler: Scheduler,
    now: float,
) -> None:
    """Once a sampling interval has passed: decay, then write every LocalQueue's."""
    ledger = scheduler.ledger
    if ledger is None or now - ledger.last_sample < ledger.config.sampling_interval:
        return
    scheduler.sample_usage()
    for queue in backend.list(TYPES["LocalQueue"])[0]:
        key = f"{queue['metadata']['namespace']}/{queue['metadata']['name']}"
        body = copy.deepcopy(queue)
        status = body.setdefault("status", {})
        status.setdefault("fairSharing", {})[STATUS] = {
            "consumedResources": {
                r: f"{amount:.6g}" for r, amount in sorted(ledger.consumed.get(key, {}).items())
            },
            "lastUpdate": iso(now),
        }
        write(body)
