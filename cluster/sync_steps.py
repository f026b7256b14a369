"""The periodic sync, one step at a time: workloads → queue status → jobs
followed → snapshots → forecasts. Each step runs and fails on its own: a step
the cluster refuses (a 403 listing JobSets, a Berth with no cluster
configuration) is recorded and the next one still runs, so one missing verb
does not stop the snapshots and forecasts everybody reads. Each step's health
(``SyncStepHealth``: last run, last success, last error, failures in a row) is
what the Overview and ``/metrics`` show.

The Celery task ``jobs.tasks.sync_cluster`` runs every step; the embedded loop
(``controlplane.embedded``) runs the same steps, some less often."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import F
from django.utils import timezone

from cluster.forecast import refresh_pending_forecasts
from cluster.models import SyncStepHealth, SyncStepName
from cluster.snapshots import snapshot_cluster, sync_queue_status
from cluster.sync import sync_workloads
from queues.backends import get_backend
from queues.backends.base import BackendError, ClusterBackend

log = logging.getLogger(__name__)
MAX_ERROR = 4000  # characters of an error kept

BackendFactory = Callable[[], ClusterBackend]


def _workloads(backend: BackendFactory) -> dict[str, Any]:
    return {"resource_version": sync_workloads(backend())}


def _queue_status(backend: BackendFactory) -> dict[str, Any]:
    return {"queue_statuses": sync_queue_status(backend())}


def _snapshots(backend: BackendFactory) -> dict[str, Any]:
    queues, capacity = snapshot_cluster(backend())
    return {"queues": queues, "capacity": capacity}


def _forecasts(backend: BackendFactory) -> dict[str, Any]:
    # From what the steps before recorded: no cluster call.
    return {"forecasts": refresh_pending_forecasts()}


Step = Callable[[BackendFactory], dict[str, Any]]
OWN_STEPS: dict[SyncStepName, Step] = {
    SyncStepName.WORKLOADS: _workloads,
    SyncStepName.QUEUE_STATUS: _queue_status,
    SyncStepName.SNAPSHOTS: _snapshots,
    SyncStepName.FORECASTS: _forecasts,
}
# Steps of the apps above, registered at start-up (jobs follows its jobs): a
# lower layer may not import them. Each runs in its place in SyncStepName.
_registered: dict[SyncStepName, Step] = {}


def register_step(name: SyncStepName, run: Step) -> None:
    _registered[name] = run


def all_steps() -> dict[SyncStepName, Step]:
    """Every step there is to run, in order."""
    found = {**OWN_STEPS, **_registered}
    return {name: found[name] for name in SyncStepName if name in found}


@dataclass
class SyncReport:
    """What one sync did: each step's figures, and the error of each that failed."""

    results: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {**self.results, **({"errors": dict(self.errors)} if self.errors else {})}


def run_sync(
    steps: Iterable[SyncStepName] | None = None, backend: BackendFactory = get_backend
) -> SyncReport:
    """Run ``steps`` (all, in order, by default), each whatever became of the
    ones before, and record how each went. ``backend`` is called by each step
    that needs the cluster, so a cluster Berth cannot configure fails those
    steps (with its reason) and not the forecasts."""
    report = SyncReport()
    every = all_steps()
    wanted = set(every if steps is None else steps)
    for name, run in every.items():
        if name not in wanted:
            continue
        started, clock = timezone.now(), time.monotonic()
        try:
            report.results.update(run(backend))
        except BackendError as exc:
            log.warning("sync step %s failed: %s", name.value, exc)
            report.errors[name.value] = str(exc)
        except Exception as exc:  # a bug or the database: logged in full, and the rest runs
            log.exception("sync step %s failed", name.value)
            report.errors[name.value] = f"{exc.__class__.__name__}: {exc}"
        record(name, started, time.monotonic() - clock, report.errors.get(name.value))
    return report


def record(name: SyncStepName, started: datetime, seconds: float, error: str | None) -> None:
    """Store one run of a step (counters in SQL: overlapping syncs both count)."""
    SyncStepHealth.objects.get_or_create(step=name.value)
    rows = SyncStepHealth.objects.filter(step=name.value)
    fields: dict[str, Any] = {"last_run_at": started, "last_duration_seconds": round(seconds, 3)}
    if error is None:
        rows.update(**fields, last_success_at=timezone.now(), consecutive_failures=0)
    else:
        rows.update(
            **fields,
            last_failure_at=timezone.now(),
            last_error=error[:MAX_ERROR],
            consecutive_failures=F("consecutive_failures") + 1,
            failures_total=F("failures_total") + 1,
        )


def health() -> list[SyncStepHealth]:
    """Every step in run order; one never run is an unsaved row with no times."""
    stored = {row.step: row for row in SyncStepHealth.objects.all()}
    return [stored.get(name.value) or SyncStepHealth(step=name.value) for name in SyncStepName]
