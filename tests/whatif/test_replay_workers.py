"""How many parts a what-if is dealt into (and how many replays a plan runs
at once) when no one set BERTH_REPLAY_WORKERS: the processes of the worker
pools that answer, asked of real Celery workers (subprocesses of this
checkout on the test Redis): a prefork pool of 2 counts 2, a solo pool 1."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest
from django.test import override_settings

from controlplane.celery import app
from tests.chaos.harness import Process, berth_env, tail, tasks_to, wait
from tests.database import worker_database_url
from whatif.scaleout import _pool_size, replay_workers

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def worker(name: str, pool: list[str], env: dict[str, str], log: Path) -> Process:
    argv = [sys.executable, "-m", "celery", "-A", "controlplane", "worker", *pool]
    argv += ["--loglevel=WARNING", "--without-gossip", "--without-mingle", "-n", f"{name}@%h"]
    return Process(name, argv, env, log)


def test_the_workers_pool_processes_are_counted(tmp_path: Path) -> None:
    redis_url = os.environ.get("REDIS_URL")
    if not redis_url:
        pytest.fail("REDIS_URL is not set: run `make test`, which provides Redis")
    queue = f"berth-test-{uuid.uuid4().hex[:8]}"
    pools = {"forked": ["--pool=prefork", "--concurrency=2"], "solo": ["--pool=solo"]}
    logs = {name: tmp_path / f"{name}.log" for name in pools}
    with tasks_to(redis_url, queue), override_settings(BERTH_REPLAY_WORKERS=0):
        env = berth_env(
            tmp_path,
            DATABASE_URL=worker_database_url(),
            CELERY_BROKER_URL=redis_url,
            BERTH_CELERY_QUEUE=queue,
        )
        workers = [worker(name, pools[name], env, logs[name]).start() for name in pools]
        try:
            wait(
                lambda: len(app.control.ping(timeout=1.0) or []) >= 2,
                lambda: "both workers to answer: " + " / ".join(tail(p) for p in logs.values()),
                120,
            )
            assert replay_workers() == 3
        finally:
            for process in workers:
                process.stop()


def test_a_pool_that_does_not_say_its_size_counts_one() -> None:
    assert _pool_size({"pool": {"max-concurrency": 4}}) == 4
    assert _pool_size({"pool": {}}) == 1
    assert _pool_size({"pool": {"max-concurrency": 0}}) == 1
    assert _pool_size(None) == 1
