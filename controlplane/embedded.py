"""The embedded mode's background loop. With no broker there are no Celery
workers or beat, so one thread next to the web server does their periodic
work: reconcile the policy when it changed (and every interval anyway), step
the simulated cluster, sync what it did into Postgres (the same steps, and the
same step health, as the ``jobs.tasks.sync_cluster`` task), answer approvals, and retry
job creates and deletes that failed. Each part runs on its own: one that fails
(a cluster that refuses a verb, or cannot be reached at all) is logged and
recorded, and the others still run."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from django.conf import settings
from django.db import close_old_connections

from approvals.controller import drive_approvals
from approvals.fairness_alerts import evaluate_fair_shares
from cluster.models import SyncStepName
from cluster.sync_steps import run_sync
from grants.lifecycle import revert_ended
from jobs.tasks import sweep_jobs
from queues.backends import get_backend
from queues.models import ReconcileRun
from queues.reconcile import applied_policy_version, policy_version, reconcile_configured_cluster
from queues.simulation.runner import step
from whatif.redrive import end_stalled

log = logging.getLogger(__name__)
FORECAST_EVERY = 5.0  # seconds
SWEEP_EVERY = 15.0  # seconds, as Celery beat's sweep-jobs
FAIR_SHARES_EVERY = 60.0  # seconds, as Celery beat's fair-shares
# Every tick: what the cluster did since the last one.
EVERY_TICK = (SyncStepName.WORKLOADS, SyncStepName.QUEUE_STATUS, SyncStepName.JOBS)


class EmbeddedLoop(threading.Thread):
    def __init__(self, interval: float | None = None) -> None:
        super().__init__(name="berth-embedded-loop", daemon=True)
        self.interval = interval or float(settings.BERTH_SIMULATED_TICK)
        self.stop_event = threading.Event()
        self.last_reconcile = self.last_snapshot = self.last_forecast = float("-inf")
        self.last_sweep = self.last_fair_shares = float("-inf")

    def run_once(self) -> None:
        now = time.monotonic()
        stale = policy_version() != applied_policy_version()
        if stale or now - self.last_reconcile > settings.BERTH_RECONCILE_INTERVAL:
            # A cluster Berth cannot reach is a failed run that says why.
            _guarded("reconcile", self._reconcile)
            self.last_reconcile = time.monotonic()
        _guarded("simulated cluster step", step)
        steps = list(EVERY_TICK)
        if now - self.last_snapshot > settings.BERTH_SYNC_INTERVAL:
            steps.append(SyncStepName.SNAPSHOTS)
            self.last_snapshot = now
        # The engine's forward runs cost more than a sync: a few seconds' lag is fine.
        if now - self.last_forecast > FORECAST_EVERY:
            steps.append(SyncStepName.FORECASTS)
            self.last_forecast = now
        run_sync(steps)  # each step guarded and recorded on its own
        _guarded("approvals", lambda: drive_approvals(get_backend()))
        if now - self.last_sweep > SWEEP_EVERY:
            _guarded("job sweep", sweep_jobs)
            # Quota grants whose end has passed (Celery beat's revert-ended-grants).
            _guarded("grant sweep", revert_ended)
            # What-if work left running by a Berth that was stopped mid-run.
            _guarded("stalled what-if sweep", end_stalled)
            self.last_sweep = now
        if now - self.last_fair_shares > FAIR_SHARES_EVERY:
            _guarded("fair shares", evaluate_fair_shares)
            self.last_fair_shares = now

    @staticmethod
    def _reconcile() -> None:
        reconcile_configured_cluster(trigger=ReconcileRun.Trigger.PERIODIC)

    def run(self) -> None:
        while not self.stop_event.is_set():
            close_old_connections()
            try:
                self.run_once()
            except Exception:  # keep the demo alive; the error is in the log
                log.exception("embedded loop step failed")
            self.stop_event.wait(self.interval)
        close_old_connections()

    def stop(self) -> None:
        self.stop_event.set()


def _guarded(what: str, part: Callable[[], object]) -> None:
    """Run one part of the loop; a failure is logged and stops nothing else."""
    try:
        part()
    except Exception:
        log.exception("embedded loop: %s failed", what)
