"""Each Deployment's container, run here with the command, arguments, config
and probes the dev overlay gives it (its emptyDirs moved to scratch folders,
gunicorn to a free port), with the data dir and the code read-only
(tests.deploy.runtime): the processes start, the probes pass while they work
and fail when the heartbeat goes stale, and nothing is written to the data dir."""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.models import WorkloadRecord
from tests.database import worker_database_url
from tests.deploy.manifests import Built, argv, build, expand, main_container
from tests.deploy.runtime import (
    SECRET_KEY,
    base_environment,
    files,
    image_data_dir,
    run,
    start,
    stop,
    wait_for,
    writable,
)
from tests.envtest.cluster import EnvtestCluster
from tests.envtest.controlplane import free_port

RUN_DIR = "/run/berth"  # the heartbeat emptyDir in the manifests
POD_ADDRESS = "10.244.0.7:8000"  # what the kubelet sends as Host unless told otherwise


@pytest.fixture(scope="module")
def dev() -> Built:
    return build("dev")


def container_environment(
    built: Built, container: dict[str, Any], data: Path, **secrets: str
) -> dict[str, str]:
    return {**base_environment(data), **built.environment(container), **secrets}


def command_of(container: dict[str, Any], environment: dict[str, str], run_dir: Path) -> list[str]:
    """The container's argv as the kubelet would expand it, its emptyDir moved."""
    words = expand(argv(container), environment)
    return [w.replace(RUN_DIR, str(run_dir)) for w in words]


def probe(
    container: dict[str, Any], kind: str, environment: dict[str, str], run_dir: Path
) -> tuple[int, str]:
    """Run an exec probe as the kubelet would: exit status and output."""
    command = [w.replace(RUN_DIR, str(run_dir)) for w in container[kind]["exec"]["command"]]
    done = run(command, environment)
    return done.returncode, done.stdout + done.stderr


def assert_heartbeat_probes(
    container: dict[str, Any], environment: dict[str, str], run_dir: Path
) -> None:
    """All three probes pass on the process's heartbeat. Liveness fails on a
    stale one and on none (both beside it: the live one keeps beating)."""
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        status, output = probe(container, kind, environment, run_dir)
        assert status == 0, (kind, output)
    stale = writable(run_dir / "stale")
    (stale / "heartbeat").touch()
    old = time.time() - 1000
    os.utime(stale / "heartbeat", (old, old))
    status, output = probe(container, "livenessProbe", environment, stale)
    assert status == 1 and "heartbeat 1000 s old" in output, output
    status, output = probe(container, "livenessProbe", environment, writable(run_dir / "none"))
    assert status == 1 and "FileNotFoundError" in output, output


def beats_again(heartbeat: Path, since: float) -> Callable[[], bool]:
    return lambda: heartbeat.stat().st_mtime > since


def test_web_serves_health_and_static_files_on_a_read_only_data_dir(
    dev: Built, tmp_path: Path
) -> None:
    data = image_data_dir(tmp_path)
    before = files(data)
    web = main_container(dev.component("web"))
    port = free_port()
    env = container_environment(
        dev,
        web,
        data,
        DATABASE_URL=os.environ["DATABASE_URL"],
        CELERY_BROKER_URL="memory://localhost/",
        BERTH_SECRET_KEY=SECRET_KEY,
    )
    command = [w.replace("--bind=0.0.0.0:8000", f"--bind=127.0.0.1:{port}") for w in argv(web)]
    assert command != argv(web)
    log = tmp_path / "web.log"
    process = start(command, env, log, data)
    try:
        wait_for(lambda: _connects(port), "gunicorn listening", log, process)
        ready = web["readinessProbe"]["httpGet"]
        # The kubelet's request: the pod's address as Host, unless the probe sets one.
        headers = {"Host": POD_ADDRESS, **{h["name"]: h["value"] for h in ready["httpHeaders"]}}
        status, body = _get(port, ready["path"], headers)
        assert status == 200, body
        assert json.loads(body) == {"status": "ok", "database": "postgresql"}
        # Without the probe's Host header Django would refuse the kubelet.
        assert _get(port, ready["path"], {"Host": POD_ADDRESS})[0] == 400
        status, css = _get(port, "/static/admin/css/base.css", headers)
        assert status == 200 and b"body" in css
        assert _connects(port)  # the liveness probe (tcpSocket)
    finally:
        stop(process)
    assert files(data) == before
    assert "Booting worker" in log.read_text()


def _connects(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _get(port: int, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path, headers=headers)
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


@pytest.mark.worker
def test_the_worker_beats_while_it_consumes(dev: Built, tmp_path: Path) -> None:
    redis_url = os.environ.get("REDIS_URL")
    if not redis_url:
        pytest.fail("REDIS_URL is not set: run `make test`, which provides Redis")
    data = image_data_dir(tmp_path)
    before = files(data)
    run_dir = writable(tmp_path / "run")
    worker = main_container(dev.component("worker"))
    env = container_environment(
        dev,
        worker,
        data,
        DATABASE_URL=os.environ["DATABASE_URL"],
        CELERY_BROKER_URL=redis_url,
        BERTH_SECRET_KEY=SECRET_KEY,
        # A queue of its own, so it takes no other test's tasks.
        BERTH_CELERY_QUEUE=f"berth-deploy-{uuid.uuid4().hex[:8]}",
    )
    log = tmp_path / "worker.log"
    process = start(command_of(worker, env, run_dir), env, log, data)
    heartbeat = run_dir / "heartbeat"
    try:
        wait_for(heartbeat.exists, "a first heartbeat", log, process)
        assert "ready." in log.read_text()
        assert_heartbeat_probes(worker, env, run_dir)
        # The worker's loop beats again within its 10 s.
        wait_for(beats_again(heartbeat, heartbeat.stat().st_mtime), "a new beat", log, process)
    finally:
        stop(process)
    assert files(data) == before


def test_beat_beats_at_every_tick(dev: Built, tmp_path: Path) -> None:
    data = image_data_dir(tmp_path)
    before = files(data)
    run_dir = writable(tmp_path / "run")
    beat = main_container(dev.component("beat"))
    env = container_environment(
        dev,
        beat,
        data,
        DATABASE_URL=os.environ["DATABASE_URL"],
        # Its messages stay in the process: nothing reaches a real queue.
        CELERY_BROKER_URL="memory://localhost/",
        BERTH_SECRET_KEY=SECRET_KEY,
        # An entry due every second, so ticks come faster than --max-interval.
        BERTH_APPROVAL_INTERVAL="1",
    )
    log = tmp_path / "beat.log"
    process = start(command_of(beat, env, run_dir), env, log, data)
    heartbeat = run_dir / "heartbeat"
    try:
        wait_for(heartbeat.exists, "a first heartbeat", log, process)
        assert_heartbeat_probes(beat, env, run_dir)
        wait_for(beats_again(heartbeat, heartbeat.stat().st_mtime), "a new tick", log, process)
        # The schedule went to the emptyDir, beside the heartbeat.
        assert any(p.name.startswith("celerybeat-schedule") for p in run_dir.iterdir())
    finally:
        stop(process)
    assert files(data) == before


@pytest.mark.django_db(transaction=True)
def test_the_watch_beats_with_every_event(dev: Built, tmp_path: Path, kube: EnvtestCluster) -> None:
    data = image_data_dir(tmp_path)
    before = files(data)
    run_dir = writable(tmp_path / "run")
    watch = main_container(dev.component("watch"))
    plane = kube.plane
    # In the pod: the ServiceAccount's token, through in-cluster config.
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "envtest",
                        "cluster": {
                            "server": plane.url,
                            "certificate-authority-data": base64.b64encode(
                                plane.ca_file.read_bytes()
                            ).decode(),
                        },
                    }
                ],
                "users": [{"name": "berth", "user": {"token": plane.berth_token}}],
                "contexts": [{"name": "berth", "context": {"cluster": "envtest", "user": "berth"}}],
                "current-context": "berth",
            }
        )
    )
    env = container_environment(
        dev,
        watch,
        data,
        DATABASE_URL=worker_database_url(),
        CELERY_BROKER_URL="memory://localhost/",
        BERTH_SECRET_KEY=SECRET_KEY,
        KUBECONFIG=str(kubeconfig),
    )
    log = tmp_path / "watch.log"
    process = start(command_of(watch, env, run_dir), env, log, data)
    heartbeat = run_dir / "heartbeat"
    try:
        wait_for(heartbeat.exists, "a first heartbeat", log, process)
        assert_heartbeat_probes(watch, env, run_dir)
        # A Workload appears (Kueue would create it for a job): the watch
        # records it and beats, long before its 60 s request ends.
        since = heartbeat.stat().st_mtime
        kube.add_foreign(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}}
        )
        kube.add_foreign(_workload())
        recorded = WorkloadRecord.objects.filter(name="job-heartbeat").exists
        wait_for(recorded, "the watch recording the Workload", log, process)
        # Well within the request's 60 s: the event's own beat, not the round's.
        wait_for(beats_again(heartbeat, since), "a new beat", log, process, seconds=20)
        assert probe(watch, "livenessProbe", env, run_dir)[0] == 0
    finally:
        stop(process)
    assert files(data) == before


def _workload() -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "job-heartbeat", "namespace": "research"},
        "spec": {
            "queueName": "research",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "train",
                                    "image": "trainer:1",
                                    "resources": {"requests": {"cpu": "1"}},
                                }
                            ]
                        }
                    },
                }
            ],
        },
    }
