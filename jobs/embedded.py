"""The embedded mode's background loop. With no broker there are no Celery
workers or beat, so one thread next to the web server does their periodic
work: reconcile the policy when it changed (and every interval anyway), step
the simulated cluster, sync what it did into Postgres, and answer approvals."""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.db import close_old_connections

from jobs.approvals.controller import drive_approvals
from jobs.follow import follow_jobs
from jobs.forecast import refresh_pending_forecasts
from jobs.snapshots import snapshot_cluster, sync_queue_status
from jobs.sync import sync_workloads
from queues.backends import get_backend
from queues.models import ReconcileRun
from queues.reconcile import applied_policy_version, policy_version, reconcile
from queues.simulation.runner import step

log = logging.getLogger(__name__)
FORECAST_EVERY = 5.0  # seconds


class EmbeddedLoop(threading.Thread):
    def __init__(self, interval: float | None = None) -> None:
        super().__init__(name="berth-embedded-loop", daemon=True)
        self.interval = interval or float(settings.BERTH_SIMULATED_TICK)
        self.stop_event = threading.Event()
        self.last_reconcile = self.last_snapshot = self.last_forecast = float("-inf")

    def run_once(self) -> None:
        backend = get_backend()
        stale = policy_version() != applied_policy_version()
        if stale or time.monotonic() - self.last_reconcile > settings.BERTH_RECONCILE_INTERVAL:
            reconcile(backend, trigger=ReconcileRun.Trigger.PERIODIC)
            self.last_reconcile = time.monotonic()
        step()
        sync_workloads(backend)
        sync_queue_status(backend)
        follow_jobs(backend)
        drive_approvals(backend)
        if time.monotonic() - self.last_snapshot > settings.BERTH_SYNC_INTERVAL:
            snapshot_cluster(backend)
            self.last_snapshot = time.monotonic()
        # The engine's forward runs cost more than a sync: a few seconds' lag is fine.
        if time.monotonic() - self.last_forecast > FORECAST_EVERY:
            refresh_pending_forecasts()
            self.last_forecast = time.monotonic()

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
