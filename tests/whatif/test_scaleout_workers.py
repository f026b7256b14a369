"""Two real Celery workers (subprocesses of this checkout, on the test Redis
and PostgreSQL) share a what-if's replays out: each replays one part, and the
run's merged figures are exactly those of one process replaying everything."""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

import pytest

from controlplane.celery import app
from tests.chaos.harness import Process, berth_env, tail, tasks_to, wait
from tests.database import worker_database_url
from tests.whatif.test_scaleout import CHANGES, scenario
from whatif import service as whatif
from whatif.figures import compare
from whatif.models import ReplayPart, ReplayPartState, WhatIfRun, WhatIfState

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def worker(name: str, env: dict[str, str], log: Path) -> Process:
    argv = [sys.executable, "-m", "celery", "-A", "controlplane", "worker", "--pool=solo"]
    argv += ["--loglevel=WARNING", "--without-gossip", "--without-mingle", "-n", f"{name}@%h"]
    return Process(name, argv, env, log)


def test_two_workers_replay_a_part_each_and_the_merge_is_one_processs_result(
    tmp_path: Path,
) -> None:
    redis_url = os.environ.get("REDIS_URL")
    if not redis_url:
        pytest.fail("REDIS_URL is not set: run `make test`, which provides Redis")
    queue = f"berth-test-{uuid.uuid4().hex[:8]}"
    logs = {name: tmp_path / f"{name}.log" for name in ("a", "b")}
    with tasks_to(redis_url, queue):
        env = berth_env(
            tmp_path,
            DATABASE_URL=worker_database_url(),
            CELERY_BROKER_URL=redis_url,
            BERTH_CELERY_QUEUE=queue,
            BERTH_REPLAY_SPLIT_MIN="1",
            BERTH_REPLAY_WORKERS="2",
        )
        workers = [worker(name, env, log).start() for name, log in logs.items()]
        try:
            wait(
                lambda: len(app.control.ping(timeout=1.0) or []) >= 2,
                lambda: "both workers to answer: " + " / ".join(tail(p) for p in logs.values()),
                120,
            )
            # Four cohort trees, 7,500 workloads: each part takes seconds.
            run = whatif.create_run(
                None, source="scenario", changes=CHANGES, scenario=scenario(4, 750)
            )
            wait(
                lambda: WhatIfRun.objects.get(pk=run.pk).done,
                lambda: "the run to end: " + " / ".join(tail(p) for p in logs.values()),
                300,
            )
        finally:
            for process in workers:
                process.stop()
    run.refresh_from_db()
    assert run.state == WhatIfState.SUCCEEDED, run.error
    prepared = whatif.prepared_for(run)
    alone = compare(prepared.today, prepared.proposal, prepared.stream())
    assert run.result == json.loads(json.dumps(alone))
    parts = list(ReplayPart.objects.filter(run=run))
    assert [p.state for p in parts] == [ReplayPartState.DONE] * 2
    assert {p.worker.split("@")[0] for p in parts} == {"a", "b"}, [p.worker for p in parts]
