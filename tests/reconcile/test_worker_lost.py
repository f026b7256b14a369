"""A worker killed in the middle of a reconcile loses nothing: the policy (the
intent) is in Postgres, the sweeper sees the cluster behind it and queues a new
run, and that run converges without writing anything twice. Real Celery
workers (separate processes, through Redis), the real kubernetes client,
the API-server double on loopback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from queues.models import ReconcileRun
from queues.reconcile import desired_objects
from queues.tasks import reconcile_policy, sweep_reconcile
from tests.celery_broker import redis_queue
from tests.database import worker_database_url
from tests.factories import cluster_queue, cohort, flavor, gpu_groups, team
from tests.kube.apiserver import FakeApiServer

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]


def wait_until(condition: Callable[[], Any], what: str, log: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}; the workers' log:\n{log.read_text()}")
        time.sleep(0.1)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[FakeApiServer, Path]]:
    with FakeApiServer() as api:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "double", "cluster": {"server": api.url}}],
                    "users": [{"name": "tester", "user": {"token": "test"}}],
                    "contexts": [
                        {"name": "double", "context": {"cluster": "double", "user": "tester"}}
                    ],
                    "current-context": "double",
                }
            )
        )
        yield api, kubeconfig


@pytest.fixture
def queue() -> Iterator[str]:
    """Tasks from this test go to a Redis queue private to it."""
    with redis_queue() as (_, name):
        yield name


def start_worker(kubeconfig: Path, queue: str, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DATABASE_URL": worker_database_url(),
        "CELERY_BROKER_URL": os.environ["REDIS_URL"],
        "BERTH_CELERY_QUEUE": queue,
        "BERTH_CLUSTER": "kubernetes",
        "KUBECONFIG": str(kubeconfig),
        "BERTH_RECONCILE_RETRY_MS": "10",
    }
    command = [sys.executable, "-m", "celery", "-A", "controlplane", "worker", "--pool=solo"]
    command += ["--loglevel=INFO", "--without-gossip", "--without-mingle", "--without-heartbeat"]
    with log.open("ab") as out:
        return subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop(worker: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if worker.poll() is None:
        os.killpg(worker.pid, sig)
        worker.wait(timeout=30)


@pytest.fixture
def policy(settings: Any) -> None:
    settings.BERTH_RECONCILE_ON_CHANGE = False  # this test sends its own tasks
    flavor("h100")
    cohort("org")
    for name in ("research", "serving", "platform"):
        team(name)
        cluster_queue(
            name,
            team=name,
            cohort="org",
            resource_groups=gpu_groups("h100", "8", borrowing_limit="4"),
        )


def managed(api: FakeApiServer) -> set[tuple[str, str, str]]:
    found = set()
    for group, plural in (
        ("kueue.x-k8s.io", "resourceflavors"),
        ("kueue.x-k8s.io", "cohorts"),
        ("kueue.x-k8s.io", "clusterqueues"),
        ("kueue.x-k8s.io", "localqueues"),
        ("kueue.x-k8s.io", "workloadpriorityclasses"),
        ("kueue.x-k8s.io", "admissionchecks"),
        ("", "namespaces"),
    ):
        for obj in api.objects(plural, group):
            labels = obj["metadata"].get("labels", {})
            if labels.get("app.kubernetes.io/managed-by") == "berth":
                found.add(
                    (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
                )
    return found


def test_a_worker_killed_mid_reconcile_loses_no_work(
    server: tuple[FakeApiServer, Path], queue: str, policy: None, tmp_path: Path
) -> None:
    api, kubeconfig = server
    log = tmp_path / "worker.log"
    wanted = {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])
        for o in desired_objects()
    }
    # The first ClusterQueue write hangs: the worker is mid-run when it dies.
    api.delay_next("PATCH", "/clusterqueues/", seconds=60)
    first = start_worker(kubeconfig, queue, log)
    try:
        reconcile_policy.delay(ReconcileRun.Trigger.MANUAL)
        wait_until(
            lambda: any(c.method == "PATCH" and "/clusterqueues/" in c.path for c in api.calls),
            "the worker to reach the ClusterQueues",
            log,
        )
        assert ReconcileRun.objects.get().status == ReconcileRun.Status.RUNNING
    finally:
        stop(first, signal.SIGKILL)
    assert managed(api) < wanted  # half applied

    api.reset_calls()
    second = start_worker(kubeconfig, queue, log)
    try:
        sweep_reconcile.delay()
        wait_until(
            lambda: ReconcileRun.objects.filter(
                trigger=ReconcileRun.Trigger.RECOVERY, status=ReconcileRun.Status.SUCCEEDED
            ).exists(),
            "the recovery run",
            log,
        )
    finally:
        stop(second)

    lost = ReconcileRun.objects.get(trigger=ReconcileRun.Trigger.MANUAL)
    assert lost.status == ReconcileRun.Status.FAILED and "worker" in lost.message
    assert managed(api) == wanted
    # Each object written at most once after the restart: nothing applied twice.
    writes = [(c.method, c.path) for c in api.write_calls()]
    assert len(writes) == len(set(writes))
    assert all(method == "PATCH" for method, _ in writes)
