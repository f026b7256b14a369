"""The base of Celery tasks that call the cluster (jobs' create and delete,
approvals' apply): Celery retries them itself on a transient cluster error
(``autoretry_for``, with ``retry_backoff`` doubling from a second up to a
minute and ``retry_jitter``), never sooner than the server's Retry-After
asked. An error the cluster will repeat is raised at once.

Run eagerly (the embedded mode, inside a web request), and once a worker's
retries are spent, nothing sleeps or retries here: the task is ignored and
the periodic pass that sweeps up unfinished intent (the jobs sweeper, the
approval controller) tries again, as it does after a lost task.
"""

from __future__ import annotations

from typing import Any

from celery import Task
from celery.exceptions import Ignore

from queues.backends.base import BackendError


class ClusterTask(Task):
    autoretry_for = (BackendError,)
    retry_backoff = True  # 1 s, then doubling
    retry_backoff_max = 60
    retry_jitter = True
    max_retries = 5

    def retry(
        self,
        args: Any = None,
        kwargs: Any = None,
        exc: Exception | None = None,
        throw: bool = True,
        eta: Any = None,
        countdown: float | None = None,
        max_retries: int | None = None,
        **options: Any,
    ) -> Any:
        # Celery's autoretry raises what this returns.
        if isinstance(exc, BackendError):
            if not exc.transient:
                return exc
            if self.request.is_eager or self.request.retries >= self.max_retries:
                return Ignore()
            countdown = max(countdown or 0.0, min(60.0, exc.retry_after or 0.0))
        return super().retry(args, kwargs, exc, throw, eta, countdown, max_retries, **options)
