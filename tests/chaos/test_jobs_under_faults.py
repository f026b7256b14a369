"""300 jobs submitted while the Celery worker is SIGKILLed five times and
Redis is killed and started again once (losing every queued message): every
accepted job reaches the cluster exactly once, none is lost or stuck, and a job
stored while the broker is down is answered 202, never a 5xx.

Real parts only: the REST API on gunicorn, three clients submitting over
HTTP, ``celery worker`` subprocesses through a throwaway Redis, the official
kubernetes client over HTTP to the loopback API-server double, the sweeper
called as beat calls it. Bounded: it fails, listing what is left, if the jobs
are not all on the cluster within a few sweeps of the last fault."""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.db import connection
from django.utils import timezone

from accounts.services import create_token
from jobs.models import JobRequest, JobState
from jobs.services import QUEUE_UNAVAILABLE, REQUEST_ANNOTATION
from jobs.tasks import sweep_jobs
from scripts.test_services import free_port
from tests.chaos.figures import report
from tests.chaos.harness import (
    Process,
    ThrowawayRedis,
    as_json,
    berth_env,
    celery_worker,
    gunicorn,
    http,
    tail,
    tasks_to,
    throwaway_redis,
    wait,
    wait_for_web,
)
from tests.database import worker_database_url
from tests.jobs.conftest import Org, job
from tests.kube.apiserver import FakeApiServer
from tests.kube.apiserver_resources import SEED_NAMESPACES

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

JOBS = 300
WORKER_KILLS = 5
REDIS_RESTART_AFTER_KILL = 3  # Redis goes down once, after this many worker kills
ANSWERS_WHILE_BROKER_DOWN = 5  # submissions stored (202) while nothing listens on Redis
CLIENTS = 3  # submitting at once, to gunicorn's two workers
# Submissions between two faults: all six land in the first 60% of them, so
# the wait of a create lost with a killed worker for the sweeper overlaps the
# rest.
SPACING = JOBS // 10
JOB_PATH = r"/namespaces/research/jobs/[^/]+$"
HOLD_SECONDS = 1.0  # the cluster holds a create this long while its worker is killed
SWEEP_EVERY = 5.0  # seconds, as beat sends sweep-jobs
# The sweeper re-queues a create lost with a killed worker or a dead Redis
# BERTH_JOB_CREATE_REDRIVE_SECONDS after it was queued or its attempt began, or,
# while a long queue waits, once it is a minute old; a few sweeps after that,
# everything must be there.
SETTLE_SECONDS = 150
URL = "/api/v1/jobs/"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[FakeApiServer, Path]]:
    """The API-server double and a kubeconfig naming it, for the workers."""
    with FakeApiServer(namespaces=(*SEED_NAMESPACES, "research", "serving")) as api:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "double", "cluster": {"server": api.url}}],
                    "users": [{"name": "berth", "user": {"token": "test"}}],
                    "contexts": [
                        {"name": "double", "context": {"cluster": "double", "user": "berth"}}
                    ],
                    "current-context": "double",
                }
            )
        )
        yield api, kubeconfig
        assert api.internal_errors == []


class Chaos(threading.Thread):
    """Kills the worker ``WORKER_KILLS`` times, each time while it waits for
    the cluster to answer a create, and starts it again at once; after the
    third kill, kills Redis and starts it again once
    ``ANSWERS_WHILE_BROKER_DOWN`` submissions were stored meanwhile."""

    def __init__(
        self, api: FakeApiServer, worker: Process, broker: ThrowawayRedis, answered: list[int]
    ) -> None:
        super().__init__(daemon=True)
        self.api, self.worker, self.broker, self.answered = api, worker, broker, answered
        self.cut_short: list[str] = []  # jobs whose worker died waiting for its create
        self.killed_at: dict[str, datetime] = {}
        self.faults = 0  # landed so far
        self.failure: str | None = None
        self.done = threading.Event()

    def run(self) -> None:
        try:
            for kill in range(1, WORKER_KILLS + 1):
                self.kill_worker_mid_task()
                if kill == REDIS_RESTART_AFTER_KILL:
                    self.faults += 1
                    self.broker.restart(down=self.while_down)
        except BaseException as exc:  # pytest.fail too: reported by the test, not lost here
            self.failure = f"{type(exc).__name__}: {exc}"
        finally:
            self.done.set()

    def kill_worker_mid_task(self) -> None:
        """Holds the next create the cluster receives and kills the worker that
        sent it while it waits for the answer; the cluster then creates the
        object anyway, as an API server does with a request it has read. The
        job's record still says submitted: only a create that recognises its
        own object keeps the next attempt from applying it again."""
        with self.api.store.lock:
            start = len(self.api.calls)
            self.api.delay_next("PATCH", JOB_PATH, seconds=HOLD_SECONDS)
        deadline = time.monotonic() + 30
        held = None
        while held is None and time.monotonic() < deadline:
            held = next(
                (
                    call.path.rsplit("/", 1)[-1]
                    for call in self.api.calls[start:]
                    if call.method == "PATCH" and re.search(JOB_PATH, call.path)
                ),
                None,
            )
            time.sleep(0.02)
        if held is None:
            raise RuntimeError(f"the worker sent no create within 30 s:\n{tail(self.worker.log)}")
        self.worker.kill()
        self.cut_short.append(held)
        self.killed_at[held] = timezone.now()
        self.faults += 1
        self.worker.start()

    def while_down(self) -> None:
        """Keeps Redis down until submissions were stored meanwhile."""
        before = len(self.answered)
        deadline = time.monotonic() + 30
        while self.answered[before:].count(202) < ANSWERS_WHILE_BROKER_DOWN:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"no 202s while Redis was down: {self.answered[before:]} were answered"
                )
            time.sleep(0.05)


class Beat:
    """The sweeper run as beat has it run: every ``SWEEP_EVERY`` seconds, here
    in this process; a run that fails is counted (a failed task, logged by the
    worker) and the next one comes all the same."""

    def __init__(self) -> None:
        self.sweeps = self.failed = 0

    def sweep(self) -> None:
        self.sweeps += 1
        try:
            sweep_jobs()
        except Exception:
            self.failed += 1


class Submitters:
    """``CLIENTS`` clients submitting the ``JOBS`` jobs over HTTP, numbered in
    order; one fault lands per ``SPACING`` submissions (a client waits for it)."""

    def __init__(
        self,
        base: str,
        token: str,
        chaos: Chaos,
        answers: dict[str, tuple[int, Any]],
        answered: list[int],
    ) -> None:
        self.base, self.token, self.chaos = base, token, chaos
        self.answers, self.answered = answers, answered
        self.lock = threading.Lock()
        self.next = 0
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(CLIENTS)]
        for thread in self.threads:
            thread.start()

    def running(self) -> bool:
        return any(thread.is_alive() for thread in self.threads)

    def run(self) -> None:
        while True:
            with self.lock:
                index, self.next = self.next, self.next + 1
            if index >= JOBS:
                return
            while index + 1 >= SPACING * (self.chaos.faults + 1) and not self.chaos.done.is_set():
                time.sleep(0.05)
            name = f"chaos-{index:03d}"
            status, _, raw = http("POST", f"{self.base}{URL}", self.token, _body(name))
            self.answers[name] = (status, as_json(raw))
            self.answered.append(status)


def _body(name: str) -> bytes:
    return json.dumps(job(name=name)).encode()


def test_jobs_survive_worker_kills_and_a_redis_restart(
    org: Org, cluster: tuple[FakeApiServer, Path], tmp_path: Path
) -> None:
    api, kubeconfig = cluster
    queue = f"berth-chaos-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "worker.log"
    token = create_token(user=org.users["alice"], name="chaos").secret
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with throwaway_redis() as broker, tasks_to(broker.url, queue):
        env = berth_env(
            tmp_path,
            DATABASE_URL=worker_database_url(),
            CELERY_BROKER_URL=broker.url,
            BERTH_CELERY_QUEUE=queue,
            BERTH_CLUSTER="kubernetes",
            KUBECONFIG=str(kubeconfig),
        )
        worker = celery_worker(env, log).start()
        web = gunicorn(env, tmp_path / "web.log", port).start()
        answers: dict[str, tuple[int, Any]] = {}  # name -> (status, body)
        answered: list[int] = []
        chaos = Chaos(api, worker, broker, answered)
        beat = Beat()
        last_sweep = time.monotonic()
        try:
            wait_for_web(base, web)
            started = time.monotonic()
            chaos.start()
            clients = Submitters(base, token, chaos, answers, answered)
            while clients.running():
                if time.monotonic() - last_sweep > SWEEP_EVERY:
                    beat.sweep()
                    last_sweep = time.monotonic()
                time.sleep(0.1)
            assert chaos.done.wait(60), "the faults did not finish"
            assert chaos.failure is None, chaos.failure
            submitted_done = time.monotonic()

            accepted = {
                name: body["id"] for name, (status, body) in answers.items() if status in (201, 202)
            }

            def unsettled() -> list[JobRequest]:
                return list(
                    JobRequest.objects.filter(pk__in=accepted.values(), state=JobState.SUBMITTED)
                )

            def settled() -> bool:
                nonlocal last_sweep
                if time.monotonic() - last_sweep > SWEEP_EVERY:
                    beat.sweep()
                    last_sweep = time.monotonic()
                return not unsettled()

            def stuck_report() -> str:
                rows = [
                    f"  #{j.pk} {j.name}: {j.reason} {j.message!r} "
                    f"(attempts {j.create_attempts}, updated {j.updated_at:%H:%M:%S})"
                    for j in unsettled()[:20]
                ]
                return (
                    f"{len(unsettled())} accepted jobs are still not on the cluster:\n"
                    + "\n".join(rows)
                    + f"\nthe worker's log:\n{tail(log)}"
                )

            wait(settled, stuck_report, SETTLE_SECONDS)
            settled_at = time.monotonic()
        finally:
            web.stop()
            worker.stop()
            connection.close()

    statuses = Counter(status for status, _ in answers.values())
    server_errors = {n: s for n, (s, _) in answers.items() if s >= 500}
    stored_while_down = [
        name
        for name, (status, body) in answers.items()
        if status == 202 and body and body.get("reason") == QUEUE_UNAVAILABLE
    ]

    # What the cluster holds: one Job per accepted request, each applied once.
    on_cluster: dict[str, str] = {}
    for obj in api.objects("jobs", "batch"):
        annotations = obj["metadata"].get("annotations") or {}
        on_cluster[obj["metadata"]["name"]] = annotations.get(REQUEST_ANNOTATION, "")
    applies = Counter(
        call.path.rsplit("/", 1)[-1]
        for call in api.calls
        if call.method in ("POST", "PATCH", "PUT") and "/namespaces/research/jobs" in call.path
    )
    records = {j.name: j for j in JobRequest.objects.filter(pk__in=accepted.values())}
    lost = sorted(name for name in accepted if name not in on_cluster)
    strangers = sorted(name for name in on_cluster if name not in accepted)
    wrong_owner = sorted(
        name for name, owner in on_cluster.items() if owner != str(accepted.get(name))
    )
    duplicates = {name: n for name, n in applies.items() if n > 1}
    stuck = sorted(name for name, j in records.items() if j.state != JobState.QUEUED)
    uid_mismatch = sorted(
        name
        for name, j in records.items()
        if name in on_cluster and j.cluster_uid != _uid(api, name)
    )

    report(
        "jobs",
        submitted=JOBS,
        accepted=len(accepted),
        answered_201=statuses[201],
        answered_202=statuses[202],
        answered_5xx=len(server_errors),
        stored_while_broker_down=len(stored_while_down),
        on_cluster=len(on_cluster),
        duplicates=sum(n - 1 for n in duplicates.values()),
        lost=len(lost),
        stuck=len(stuck),
        worker_kills=worker.kills,
        kills_mid_create=len(chaos.cut_short),
        # How long after its worker died each of those was recorded as created.
        cut_short_recovered_after_seconds=sorted(
            round((records[name].created_on_cluster_at - chaos.killed_at[name]).total_seconds())
            for name in chaos.cut_short
            if records[name].created_on_cluster_at
        ),
        redis_restarts=broker.restarts,
        sweeps=beat.sweeps,
        sweeps_failed=beat.failed,
        submit_seconds=round(submitted_done - started, 1),
        settle_seconds=round(settled_at - submitted_done, 1),
    )
    assert server_errors == {}, f"5xx answers: {server_errors}"
    assert set(statuses) <= {201, 202}, f"answers: {dict(statuses)}"
    assert len(accepted) == JOBS
    assert worker.kills == WORKER_KILLS and broker.restarts == 1
    # The faults hit what they were meant to: creates in flight, and
    # submissions with nothing listening on the broker.
    assert len(chaos.cut_short) == WORKER_KILLS
    # Created by the cluster after their worker died: recognised, not applied again.
    assert {name: applies[name] for name in chaos.cut_short} == dict.fromkeys(chaos.cut_short, 1)
    assert len(stored_while_down) >= ANSWERS_WHILE_BROKER_DOWN, dict(statuses)
    assert lost == [], f"accepted but never created: {lost}"
    assert strangers == [] and wrong_owner == [], (strangers, wrong_owner)
    assert duplicates == {}, f"applied more than once: {duplicates}"
    assert stuck == [], f"not queued on the cluster: {stuck}"
    assert uid_mismatch == [], f"the record names another object: {uid_mismatch}"
    assert len(on_cluster) == len(accepted) == JOBS


def _uid(api: FakeApiServer, name: str) -> str:
    obj = api.get_object("batch", "jobs", name, "research")
    return str(obj["metadata"]["uid"]) if obj else ""
