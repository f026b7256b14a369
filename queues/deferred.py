"""Queue a Celery task by its name once the current transaction commits.

Services name the task they want rather than import its module: a task
module imports the services it runs, so importing it back would be a cycle.
The intent is always stored before this runs, so a task that cannot be queued
(a broker that is down, or, in the embedded mode where tasks run right here,
one that fails) is logged and left to the periodic pass that catches up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery import current_app
from django.db import transaction

log = logging.getLogger(__name__)


def after_commit(
    task_name: str,
    *args: Any,
    stored: str,
    on_failure: Callable[[], None] | None = None,
) -> None:
    """Queue ``task_name(*args)`` after the commit. ``stored`` says what is kept
    if queueing fails (``"job 12: stored"``), for the log line; ``on_failure``
    records it where the caller answers from (a job's reason)."""

    def queue() -> None:
        if not send(task_name, *args, stored=stored) and on_failure is not None:
            on_failure()

    transaction.on_commit(queue)


def send(task_name: str, *args: Any, stored: str) -> bool:
    """Queue it now (run it now, embedded); returns whether that worked."""
    try:
        current_app.tasks[task_name].delay(*args)
    except Exception:
        log.exception("%s, but %s could not be run now; it is retried later", stored, task_name)
        return False
    return True
