"""Real Celery workers for the tests that share replays out: subprocesses of
this checkout on the test Redis and PostgreSQL, consuming a queue of their
own, with this process's tasks sent there while they run."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from controlplane.celery import app
from tests.chaos.harness import Process, berth_env, tail, tasks_to, wait
from tests.database import worker_database_url

SOLO = ("--pool=solo",)


def worker(name: str, pool: Sequence[str], env: dict[str, str], log: Path) -> Process:
    argv = [sys.executable, "-m", "celery", "-A", "controlplane", "worker", *pool]
    argv += ["--loglevel=WARNING", "--without-gossip", "--without-mingle", "-n", f"{name}@%h"]
    return Process(name, argv, env, log)


@contextmanager
def celery_workers(
    tmp_path: Path, pools: Mapping[str, Sequence[str]], **settings: str
) -> Iterator[Callable[[], str]]:
    """One worker per entry of ``pools`` (its node name -> its pool options),
    with ``settings`` in their environment, all answering before it yields;
    it yields what their logs end with, for a failure's message."""
    redis_url = os.environ.get("REDIS_URL")
    if not redis_url:
        pytest.fail("REDIS_URL is not set: run `make test`, which provides Redis")
    queue = f"berth-test-{uuid.uuid4().hex[:8]}"
    logs = [tmp_path / f"{name}.log" for name in pools]
    with tasks_to(redis_url, queue):
        env = berth_env(
            tmp_path,
            DATABASE_URL=worker_database_url(),
            CELERY_BROKER_URL=redis_url,
            BERTH_CELERY_QUEUE=queue,
            **settings,
        )
        workers = [
            worker(name, pool, env, log)
            for (name, pool), log in zip(pools.items(), logs, strict=True)
        ]
        for process in workers:
            process.start()

        def tails() -> str:
            return " / ".join(tail(log) for log in logs)

        try:
            wait(
                lambda: len(app.control.ping(timeout=1.0) or []) >= len(workers),
                lambda: "the workers to answer: " + tails(),
                120,
            )
            yield tails
        finally:
            for process in workers:
                process.stop()
