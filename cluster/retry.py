"""How a Celery task that talks to the cluster retries a transient error
(jobs' create and delete, approvals' apply)."""

from __future__ import annotations

import random
from typing import Any

from queues.backends.base import BackendError


def backoff(retries: int) -> float:
    """Seconds before retry number ``retries`` + 1: doubling, with jitter."""
    return float(random.uniform(0.5, 1.0) * min(60.0, 2.0**retries))


def retry_later(task: Any, exc: BackendError) -> str:
    """A transient cluster error: on a worker, retry with backoff (at least what
    the server's Retry-After asked, within a minute). Run eagerly (the embedded
    mode, inside a web request) nothing sleeps: the periodic sweep tries again,
    as it does once a worker's retries are spent; the job already says why."""
    if task.request.is_eager or task.request.retries >= task.max_retries:
        return "retrying"
    countdown = max(backoff(task.request.retries), min(60.0, exc.retry_after or 0.0))
    raise task.retry(exc=exc, countdown=countdown) from exc
