"""Pointing the Celery app at the test Redis for one test, and back.

Tests run with no broker (tasks eager). A task sent eagerly earlier in the run
leaves the app holding a connection pool for the in-memory transport, which a
later change of ``broker_url`` does not replace: messages would go to memory
while the worker listens on Redis. So the pools are dropped both ways."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from controlplane.celery import app


def _drop_pools() -> None:
    # Dropped, not closed: kombu keeps pools in a registry shared by the process,
    # and a closed one would be handed out again to the next eager task.
    app._pool = None
    app.amqp._producer_pool = None


@contextmanager
def redis_queue() -> Iterator[tuple[str, str]]:
    """Send tasks to a Redis queue private to this test. Yields (redis URL, queue)."""
    redis_url = os.environ.get("REDIS_URL")
    if not redis_url:
        pytest.fail("REDIS_URL is not set: run `make test`, which provides Redis")
    queue = f"berth-test-{uuid.uuid4().hex[:8]}"
    saved = {k: app.conf[k] for k in ("broker_url", "task_always_eager", "task_default_queue")}
    _drop_pools()
    app.conf.update(broker_url=redis_url, task_always_eager=False, task_default_queue=queue)
    try:
        yield redis_url, queue
    finally:
        _drop_pools()
        app.conf.update(saved)


@contextmanager
def redis_worker() -> Iterator[str]:
    """A real Celery worker thread (solo pool) consuming a Redis queue private to
    this test; tasks sent meanwhile go to it. Yields the queue's name. Berth's
    tasks keep no results, so tests watch PostgreSQL, not a result backend."""
    from celery.contrib.testing.worker import start_worker

    with (
        redis_queue() as (_, queue),
        start_worker(
            app,
            pool="solo",
            loglevel="WARNING",
            perform_ping_check=False,
            queues=[queue],
            shutdown_timeout=30,
        ),
    ):
        yield queue


def wait_until(condition: Callable[[], object], what: str, seconds: float = 30) -> None:
    """Poll ``condition`` until it is true; fail naming ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)
