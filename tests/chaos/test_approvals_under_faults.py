"""Urgent-release approvals decided over HTTP while the web (gunicorn) and the
Celery worker are SIGKILLed twice each and Redis is killed and started again
once: every decision is written exactly once, none is lost, each reaches its
Workload exactly once, and no Workload ever shows the check Ready without a
stored approval. Some requests are pressed twice at the same moment by two
approvers: one wins, the other is told it is already decided.

Clients do what a careful client does: every decision carries an
Idempotency-Key, and a request whose connection was refused or cut (the web
was down) is sent again with the same key until it is answered. The cluster
is Berth's simulated one (in PostgreSQL, shared with the processes); this test
plays Kueue on it, and runs the approval controller's pass as beat has a
worker run it."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from accounts.services import create_token
from approvals.controller import drive_approvals
from approvals.models import ApprovalAction, ApprovalEvent, ApprovalRequest, ApprovalState
from approvals.status import check_of
from jobs.models import JobRequest, JobState
from queues.models import SimulatedEvent, SimulatedObject
from scripts.test_services import free_port
from tests.approvals.approval_support import approvers
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
from tests.jobs.conftest import Org
from tests.jobs.simulated_cluster import Cluster

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

REQUESTS = 36
DOUBLE_PRESSES = 8  # of them decided by two approvers at the same moment
FAULTS = ("web", "worker", "redis", "web", "worker")
SPACING = REQUESTS // (len(FAULTS) + 1)  # decisions between two faults
DECIDED_WHILE_BROKER_DOWN = 3
BEAT_EVERY = 2.0  # seconds between approval passes (beat: BERTH_APPROVAL_INTERVAL, 15)
SETTLE_SECONDS = 90
URGENT = {
    "queue": "urgent-release",
    "nodes": 1,
    "gpus_per_node": 1,
    "priority_class": "train-high",
    "justification": "release 2026.12 is blocked on this eval regression",
    "expected_runtime_seconds": 600,
}


@dataclass
class Answer:
    status: int
    body: Any
    attempts: int  # 1 unless the connection was refused or cut


@dataclass
class Clients:
    """Approvers' HTTP clients against the web, sending a decision again with
    its key until it is answered; what is on the wire counts as in flight."""

    base: str
    tokens: dict[str, str]
    in_flight: int = 0
    answered: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def decide(self, who: str, request_id: int, approve: bool, key: str) -> Answer:
        verb, body = ("approve", {"comment": "go"}) if approve else ("reject", {"reason": "no"})
        url = f"{self.base}/api/v1/approvals/{request_id}/{verb}/"
        deadline = time.monotonic() + 150  # past a slow restart of the web
        attempts = 0
        while True:
            attempts += 1
            with self.lock:
                self.in_flight += 1
            try:
                status, _, raw = http(
                    "POST",
                    url,
                    self.tokens[who],
                    json.dumps(body).encode(),
                    Idempotency_Key=key,
                )
            finally:
                with self.lock:
                    self.in_flight -= 1
            if status != 0 or time.monotonic() > deadline:
                with self.lock:
                    self.answered.append(status)
                return Answer(status, as_json(raw), attempts)
            time.sleep(0.3)  # the web is down or restarting: the same key again


class Chaos(threading.Thread):
    """The faults of ``FAULTS``, in order: the web killed while a decision is
    on the wire, the worker killed while it holds a message, Redis killed until
    decisions were stored meanwhile; each process is started again at once."""

    def __init__(
        self, web: Process, base: str, worker: Process, broker: ThrowawayRedis, clients: Clients
    ) -> None:
        super().__init__(daemon=True)
        self.web, self.base, self.worker, self.broker = web, base, worker, broker
        self.clients = clients
        self.faults = 0
        self.web_kills_in_flight = self.worker_kills_in_flight = 0
        self.failure: str | None = None
        self.done = threading.Event()

    def run(self) -> None:
        try:
            for fault in FAULTS:
                getattr(self, f"kill_{fault}")()
                self.faults += 1
        except BaseException as exc:  # pytest.fail too: reported by the test, not lost here
            self.failure = f"{type(exc).__name__}: {exc}"
            self.faults = len(FAULTS)
        finally:
            self.done.set()

    def kill_web(self) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not self.clients.in_flight:
            time.sleep(0.005)
        self.web_kills_in_flight += bool(self.clients.in_flight)
        self.web.kill()
        self.web.start()
        wait_for_web(self.base, self.web)

    def kill_worker(self) -> None:
        stale = self.broker.in_flight()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not (self.broker.in_flight() - stale):
            time.sleep(0.02)
        self.worker_kills_in_flight += bool(self.broker.in_flight() - stale)
        self.worker.kill()
        self.worker.start()

    def kill_redis(self) -> None:
        def while_down() -> None:
            before = len(self.clients.answered)
            deadline = time.monotonic() + 30
            while (
                sum(s in (200, 202) for s in self.clients.answered[before:])
                < DECIDED_WHILE_BROKER_DOWN
            ):
                if time.monotonic() > deadline:
                    raise RuntimeError("no decisions were stored while Redis was down")
                time.sleep(0.05)

        self.broker.restart(down=while_down)


class Beat(threading.Thread):
    """Kueue acting on the simulated cluster every half second (this test
    plays it), and the approval controller's pass every ``BEAT_EVERY`` seconds
    as another worker would run it for beat: here, in this process, beside the
    worker that runs the apply tasks, so a pass and a task may write the same
    decision at the same moment."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.stop = threading.Event()
        self.passes = self.passes_failed = 0
        self.failure: str | None = None

    def run(self) -> None:
        last_pass = 0.0
        try:
            while not self.stop.wait(0.5):
                self.cluster.kueue.tick(time.time())
                if time.monotonic() - last_pass > BEAT_EVERY:
                    last_pass = time.monotonic()
                    self.passes += 1
                    try:
                        drive_approvals(self.cluster.backend)
                    except Exception:  # a failed task: logged, and the next pass comes
                        self.passes_failed += 1
        except BaseException as exc:  # reported by the test, not lost in a thread
            self.failure = f"{type(exc).__name__}: {exc}"
        finally:
            connection.close()


@pytest.fixture
def requests_raised(org: Org) -> tuple[Cluster, list[ApprovalRequest]]:
    """``REQUESTS`` urgent jobs holding quota, each with a pending request."""
    cluster = Cluster()
    jobs = [cluster.submit(org.alice, name=f"urgent-{i:02d}", **URGENT) for i in range(REQUESTS)]
    cluster.at(time.time())
    reserved = JobRequest.objects.filter(pk__in=jobs, state=JobState.QUOTA_RESERVED).count()
    assert reserved == REQUESTS, f"only {reserved} of {REQUESTS} urgent jobs reserved quota"
    assert drive_approvals(cluster.backend)["raised"] == REQUESTS
    return cluster, list(ApprovalRequest.objects.order_by("pk"))


def test_decisions_survive_web_and_worker_kills_and_a_redis_restart(
    org: Org, requests_raised: tuple[Cluster, list[ApprovalRequest]], tmp_path: Path
) -> None:
    cluster, requests = requests_raised
    people = approvers()
    tokens = {who: create_token(user=people[who], name="chaos").secret for who in ("carol", "erin")}
    queue = f"berth-chaos-{uuid.uuid4().hex[:8]}"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # Which requests get two approvers at once, and what each decision is.
    doubled = {r.pk for r in requests[1 :: REQUESTS // DOUBLE_PRESSES][:DOUBLE_PRESSES]}
    verdicts = {r.pk: i % 3 != 2 for i, r in enumerate(requests)}  # two approvals per rejection
    sent: dict[tuple[int, str], tuple[bool, Answer]] = {}
    started = time.monotonic()

    with throwaway_redis() as broker, tasks_to(broker.url, queue):
        env = berth_env(
            tmp_path,
            DATABASE_URL=worker_database_url(),
            CELERY_BROKER_URL=broker.url,
            BERTH_CELERY_QUEUE=queue,
            BERTH_CLUSTER="simulated",
        )
        worker = celery_worker(env, tmp_path / "worker.log").start()
        web = gunicorn(env, tmp_path / "web.log", port).start()
        beat = Beat(cluster)
        try:
            wait_for_web(base, web)
            beat.start()
            clients = Clients(base, tokens)
            chaos = Chaos(web, base, worker, broker, clients)
            chaos.start()
            for index, request in enumerate(requests):
                while index >= SPACING * (chaos.faults + 1) and not chaos.done.is_set():
                    time.sleep(0.05)
                approve = verdicts[request.pk]
                if request.pk in doubled:  # carol and erin press at the same moment
                    _press_together(clients, sent, request.pk, approve)
                else:
                    sent[(request.pk, "carol")] = (
                        approve,
                        clients.decide("carol", request.pk, approve, _key()),
                    )
            assert chaos.done.wait(60), "the faults did not finish"
            assert chaos.failure is None, chaos.failure
            decided_at = time.monotonic()

            def undelivered() -> list[ApprovalRequest]:
                return list(
                    ApprovalRequest.objects.filter(pk__in=[r.pk for r in requests]).exclude(
                        applied_at__isnull=False
                    )
                )

            wait(
                lambda: not undelivered(),
                lambda: (
                    "decisions never written to their Workload: "
                    + ", ".join(f"#{r.pk} {r.state}" for r in undelivered())
                    + f"\nthe worker's log:\n{tail(tmp_path / 'worker.log')}"
                ),
                SETTLE_SECONDS,
            )
            time.sleep(1.5)  # Kueue acts on the last ones
            settled_at = time.monotonic()
        finally:
            beat.stop.set()
            beat.join(10)
            web.stop()
            worker.stop()
            connection.close()
    assert beat.failure is None, beat.failure

    # --- what the clients were told
    answers = Counter(answer.status for _, answer in sent.values())
    server_errors = {k: a.status for k, (_, a) in sent.items() if a.status >= 500 or a.status == 0}
    winners: dict[int, tuple[str, bool]] = {}
    refused_doubles = 0
    wrong: list[str] = []
    for (pk, who), (approve, answer) in sent.items():
        if answer.status in (200, 202):
            if pk in winners:
                wrong.append(f"#{pk}: both presses were answered as decided")
            winners[pk] = (who, approve)
        elif answer.status == 409 and pk in doubled:
            assert answer.body["rule"] == "already-decided", answer.body
            refused_doubles += 1
        else:
            wrong.append(f"#{pk} {who}: {answer.status} {answer.body}")

    # --- what Berth stored
    stored = {r.pk: r for r in ApprovalRequest.objects.select_related("decided_by")}
    decisions = Counter(
        ApprovalEvent.objects.filter(
            action__in=[ApprovalAction.APPROVED, ApprovalAction.REJECTED]
        ).values_list("request_id", flat=True)
    )
    applied = Counter(
        ApprovalEvent.objects.filter(action=ApprovalAction.APPLIED).values_list(
            "request_id", flat=True
        )
    )
    lost = []
    for pk, (who, approve) in winners.items():
        request = stored[pk]
        verdict = ApprovalState.APPROVED if approve else ApprovalState.REJECTED
        if request.state != verdict or request.decided_by.get_username() != who:
            lost.append(f"#{pk}: {who} was told {verdict}; stored: {request.state}")
    undecided = sorted(pk for pk in stored if pk not in winners)

    # --- what the cluster saw: each Workload's check, over its whole history
    uid_of = {r.workload_uid: r for r in stored.values()}
    writes: dict[str, set[tuple[str, str]]] = {}
    ready_without_approval: list[str] = []
    for event in SimulatedEvent.objects.filter(kind="Workload").order_by("id"):
        uid = event.body["metadata"].get("uid")
        check = check_of(event.body)
        if uid not in uid_of or check is None or check.get("state") == "Pending":
            continue
        writes.setdefault(uid, set()).add((check["state"], check.get("lastTransitionTime", "")))
        request = uid_of[uid]
        if check["state"] == "Ready" and not (
            request.state == ApprovalState.APPROVED
            and request.decided_at is not None
            and request.decided_at <= event.at
        ):
            ready_without_approval.append(f"{event.body['metadata']['name']} (#{request.pk})")
    final = {
        obj.uid: (check_of(obj.body) or {}).get("state")
        for obj in SimulatedObject.objects.filter(kind="Workload")
    }
    shown = {ApprovalState.APPROVED: "Ready", ApprovalState.REJECTED: "Rejected"}
    mismatched = [
        f"#{r.pk} {r.state}, Workload shows {final.get(r.workload_uid)}"
        for r in stored.values()
        if final.get(r.workload_uid) != shown.get(r.state)
    ]

    report(
        "approvals",
        requests=REQUESTS,
        decisions_sent=len(sent),
        double_presses=len(doubled),
        answered=dict(sorted(answers.items())),
        resent_after_a_cut=sum(a.attempts - 1 for _, a in sent.values()),
        answered_5xx_or_never=len(server_errors),
        written_once=sum(1 for pk in stored if decisions[pk] == 1),
        written_twice=sum(1 for n in decisions.values() if n > 1),
        lost=len(lost) + len(undecided),
        applied_once=sum(1 for pk in stored if applied[pk] == 1),
        workload_writes_per_decision=sorted({len(w) for w in writes.values()}),
        ready_without_approval=len(ready_without_approval),
        web_kills=web.kills,
        web_kills_mid_request=chaos.web_kills_in_flight,
        worker_kills=worker.kills,
        worker_kills_mid_task=chaos.worker_kills_in_flight,
        redis_restarts=broker.restarts,
        approval_passes=beat.passes,
        approval_passes_failed=beat.passes_failed,
        decide_seconds=round(decided_at - started, 1),
        settle_seconds=round(settled_at - decided_at, 1),
    )
    assert server_errors == {}, f"5xx or no answer: {server_errors}"
    assert wrong == [], wrong
    assert refused_doubles == len(doubled)
    assert lost == [] and undecided == [], (lost, undecided)
    assert all(decisions[pk] == 1 for pk in stored), f"decision events: {dict(decisions)}"
    assert all(applied[pk] == 1 for pk in stored), f"applied events: {dict(applied)}"
    assert {uid: len(w) for uid, w in writes.items() if len(w) != 1} == {}, writes
    assert set(writes) == set(uid_of), "decisions that never reached their Workload"
    assert ready_without_approval == [], ready_without_approval
    assert mismatched == [], mismatched
    assert (web.kills, worker.kills, broker.restarts) == (2, 2, 1)
    assert chaos.worker_kills_in_flight >= 1 and chaos.web_kills_in_flight >= 1


def _key() -> str:
    return uuid.uuid4().hex


def _press_together(
    clients: Clients,
    sent: dict[tuple[int, str], tuple[bool, Answer]],
    request_id: int,
    approve: bool,
) -> None:
    """carol sends ``approve``, erin the opposite, at the same moment."""
    start = threading.Barrier(2)

    def press(who: str, verdict: bool) -> None:
        start.wait()
        sent[(request_id, who)] = (verdict, clients.decide(who, request_id, verdict, _key()))

    threads = [
        threading.Thread(target=press, args=("carol", approve)),
        threading.Thread(target=press, args=("erin", not approve)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
