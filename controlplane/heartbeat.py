"""Heartbeat files for the probes of Berth's long-running processes on Kubernetes.

A pod's liveness probe must tell "making progress" from "the process still
exists": a Celery worker whose event loop hangs, or a watch stuck on a dead
connection, stays alive forever. So each process touches a file from its own
main loop, and the probe (``deploy/base``: a stdlib one-liner, no Django, a few
milliseconds) checks how old the file is. A process removes the file it
inherits when it starts (an emptyDir outlives a container restart), so only its
own beats count.

- worker: ``celery -A controlplane worker --heartbeat-file PATH`` (a worker
  bootstep; the option exists on every worker, off unless given);
- beat: ``celery -A controlplane beat --scheduler controlplane.heartbeat:
  HeartbeatScheduler``: the file ``heartbeat`` beside the schedule file;
- the workload watch: ``manage.py sync_watch --heartbeat-file PATH``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import click
from celery import Celery, bootsteps
from celery.beat import PersistentScheduler

log = logging.getLogger(__name__)

# The worker's beat; well under the probes' limits, and a touch costs nothing.
WORKER_INTERVAL = 10.0


def touch(path: Path) -> None:
    """Mark the process alive now. A failure is logged, not raised: the probe
    then fails and restarts the pod, which beats crashing in the middle of a task."""
    try:
        path.touch()
    except OSError as exc:
        log.warning("heartbeat %s cannot be written: %s", path, exc)


def forget(path: Path) -> None:
    """Remove a heartbeat left by an earlier process."""
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("stale heartbeat %s cannot be removed: %s", path, exc)


class WorkerHeartbeat(bootsteps.StartStopStep):
    """Touches ``--heartbeat-file`` every WORKER_INTERVAL seconds from the
    worker's timer. With a Redis broker the timer is driven by the worker's
    event loop (any pool), so the beats stop when that loop stops; the first one
    comes once the loop runs, i.e. once the worker consumes."""

    requires = ("celery.worker.components:Timer",)

    def __init__(self, parent: Any, heartbeat_file: str | None = None, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.path = Path(heartbeat_file) if heartbeat_file else None
        self.enabled = self.path is not None
        self.entry: Any = None

    def start(self, parent: Any) -> None:
        if self.path is None:  # disabled steps are not started; this is for mypy
            return
        forget(self.path)
        parent.timer.call_after(0, touch, (self.path,))
        self.entry = parent.timer.call_repeatedly(WORKER_INTERVAL, touch, (self.path,))

    def stop(self, parent: Any) -> None:
        if self.entry is not None:
            self.entry.cancel()
            self.entry = None


def install(app: Celery) -> None:
    """Give ``celery worker`` the ``--heartbeat-file`` option and its step."""
    app.user_options["worker"].add(
        click.Option(
            ["--heartbeat-file"],
            default=None,
            help="Touch this file every few seconds while the worker's event loop runs "
            "(for a Kubernetes liveness probe).",
        )
    )
    app.steps["worker"].add(WorkerHeartbeat)


class HeartbeatScheduler(PersistentScheduler):
    """Celery's default scheduler, touching ``heartbeat`` beside the schedule file
    after every tick. Beat ticks whenever an entry is due and at least every
    ``--max-interval`` seconds, which bounds the gap between beats."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        schedule = Path(kwargs.get("schedule_filename") or "celerybeat-schedule")
        self.heartbeat = schedule.with_name("heartbeat")
        forget(self.heartbeat)
        super().__init__(*args, **kwargs)

    def tick(self, *args: Any, **kwargs: Any) -> float:
        interval = super().tick(*args, **kwargs)
        touch(self.heartbeat)
        return interval
