"""The moving parts of the chaos tests, as real processes on loopback: a
throwaway Redis the test may kill and start again (never the shared one), Celery
workers and gunicorn as subprocesses of this checkout, and a throwaway
PostgreSQL (``scripts/test_services.py``'s own) that can be stopped and started
under a running Berth. Nothing here patches Berth; a test only starts, kills
and restarts what production runs."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from controlplane.celery import app
from scripts.test_services import (
    ServiceError,
    as_user,
    check_redis,
    free_port,
    postgres_bindir,
    run,
    start_system_postgres,
    unprivileged_user,
    wait_for,
)
from tests.celery_broker import _drop_pools
from tests.envtest import unavailable

ROOT = Path(__file__).resolve().parents[2]
SECRET_KEY = "chaos-" + "k" * 50


def wait(condition: Callable[[], object], what: Callable[[], str] | str, seconds: float) -> None:
    """Poll ``condition`` for at most ``seconds``; then fail saying ``what``
    (called at that moment when it is a function, so it can list what is left)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"after {seconds:.0f} s: {what() if callable(what) else what}")
        time.sleep(0.2)


def tail(path: Path, lines: int = 40) -> str:
    if not path.exists():
        return f"({path} was never written)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


# --------------------------------------------------------------------------- Redis


class ThrowawayRedis:
    """A redis-server of this test's own on a fixed loopback port, with no
    persistence: killing it loses every queued message, as a crashed broker
    without a disk does."""

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            unavailable("the chaos tests need redis-server (Debian: apt-get install redis-server)")
        self.binary = binary
        self.workdir = workdir
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self._client = redis.Redis.from_url(self.url, socket_connect_timeout=1, socket_timeout=1)

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                *(self.binary, "--port", str(self.port), "--bind", "127.0.0.1"),
                *("--save", "", "--appendonly", "no", "--dir", str(self.workdir)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: check_redis(self.url), "the throwaway Redis")

    def kill(self) -> None:
        """SIGKILL: a crash, not a shutdown."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def restart(self, down: Callable[[], None] = lambda: None) -> None:
        """Kill it, call ``down`` while nothing listens, start it again."""
        self.kill()
        down()
        self.start()
        self.restarts += 1

    def in_flight(self) -> set[bytes]:
        """Delivery tags of messages taken by a worker and not acknowledged
        (kombu's ``unacked`` hash); empty while Redis is down."""
        try:
            return set(self._client.hkeys("unacked"))
        except redis.RedisError:
            return set()


@contextlib.contextmanager
def throwaway_redis() -> Iterator[ThrowawayRedis]:
    workdir = Path(tempfile.mkdtemp(prefix="berth-chaos-redis-"))
    server = ThrowawayRedis(workdir)
    server.start()
    try:
        yield server
    finally:
        server.kill()
        shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def tasks_to(broker_url: str, queue: str) -> Iterator[None]:
    """This process's Celery app sends to ``broker_url``/``queue`` (as the web
    does in production) instead of running tasks eagerly."""
    saved = {k: app.conf[k] for k in ("broker_url", "task_always_eager", "task_default_queue")}
    _drop_pools()
    app.conf.update(broker_url=broker_url, task_always_eager=False, task_default_queue=queue)
    try:
        yield
    finally:
        _drop_pools()
        app.conf.update(saved)


# --------------------------------------------------------------------------- processes


def berth_env(workdir: Path, **extra: str) -> dict[str, str]:
    """The environment of a Berth process started by a chaos test: this
    checkout first on the path, quiet logs, no demo load, and ``extra``
    (DATABASE_URL, CELERY_BROKER_URL, BERTH_CLUSTER, ...)."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CELERY_BROKER_URL")}
    env.update(
        PYTHONPATH=str(ROOT),
        DJANGO_SETTINGS_MODULE="controlplane.settings",
        BERTH_DATA_DIR=str(workdir / "data"),
        BERTH_SECRET_KEY=SECRET_KEY,
        BERTH_DEMO_LOAD="false",
        BERTH_RECONCILE_ON_CHANGE="false",
        BERTH_LOG_LEVEL="warning",
    )
    env.pop("BERTH_CLUSTER", None)
    env.update(extra)
    return env


class Process:
    """A Berth process (a Celery worker, gunicorn) in its own process group,
    so a kill takes its children too; output appended to ``log``."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.name, self.argv, self.env, self.log = name, argv, env, log
        self.process: subprocess.Popen[bytes] | None = None
        self.kills = 0
        self.starts = 0

    def start(self) -> Process:
        with self.log.open("ab") as out:
            out.write(f"==> {self.name} start {self.starts + 1}\n".encode())
            out.flush()
            self.process = subprocess.Popen(
                self.argv,
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts += 1
        return self

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _signal(self, sig: int) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)

    def kill(self) -> None:
        """SIGKILL the whole group: what the OOM killer or a node loss does."""
        if self.alive:
            self._signal(signal.SIGKILL)
            assert self.process is not None
            self.process.wait(timeout=30)
            self.kills += 1
        else:  # its group may still hold children
            self._signal(signal.SIGKILL)

    def stop(self) -> None:
        if self.alive:
            self._signal(signal.SIGTERM)
            assert self.process is not None
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.process.wait(timeout=10)
        self._signal(signal.SIGKILL)


def celery_worker(env: dict[str, str], log: Path) -> Process:
    """``celery worker --pool=solo``, as ``make worker`` runs it."""
    argv = [sys.executable, "-m", "celery", "-A", "controlplane", "worker", "--pool=solo"]
    argv += ["--loglevel=WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat"]
    return Process("worker", argv, env, log)


def gunicorn(env: dict[str, str], log: Path, port: int) -> Process:
    """The web as the image runs it (gunicorn, sync workers), two workers."""
    argv = [sys.executable, "-m", "gunicorn", "controlplane.wsgi:application", "--preload"]
    argv += ["--bind", f"127.0.0.1:{port}", "--workers", "2", "--timeout", "60"]
    return Process("web", argv, env, log)


def wait_for_web(base_url: str, web: Process, seconds: float = 120) -> None:
    began = time.monotonic()

    def answers() -> bool:
        if not web.alive:
            pytest.fail(f"gunicorn exited:\n{tail(web.log)}")
        try:
            with urllib.request.urlopen(f"{base_url}/healthz", timeout=2) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def why() -> str:
        pid = web.process.pid if web.process else None
        return (
            f"gunicorn (pid {pid}, alive: {web.alive}) did not answer /healthz "
            f"{time.monotonic() - began:.0f} s after its start:\n{tail(web.log)}"
        )

    wait(answers, why, seconds)


def http(
    method: str, url: str, token: str, body: bytes | None = None, **headers: str
) -> tuple[int, dict[str, str], bytes]:
    """One request; (status, headers, body). A refused or cut connection is
    status 0 (nothing was answered)."""
    request = urllib.request.Request(url, data=body, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Accept", "application/json")
    if body is not None:
        request.add_header("Content-Type", "application/json")
    for name, value in headers.items():
        request.add_header(name.replace("_", "-"), value)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()
    except (OSError, urllib.error.URLError):
        return 0, {}, b""


# --------------------------------------------------------------------------- PostgreSQL


class ThrowawayPostgres:
    """A PostgreSQL cluster of the test's own (the system's ``initdb``/``pg_ctl``,
    started by ``scripts/test_services.py``), which the test may stop under a
    running Berth and start again with the same options."""

    def __init__(self) -> None:
        bindir = postgres_bindir()
        if bindir is None:
            unavailable("the chaos tests need PostgreSQL's initdb and pg_ctl (Debian: postgresql)")
        self.bindir: Path = bindir
        self.user = unprivileged_user()
        # Not under pytest's tmp_path: its parents are private to root, and the
        # server runs as an unprivileged user when the test runs as root.
        self.workdir = Path(tempfile.mkdtemp(prefix="berth-chaos-pg-"))
        try:
            self.url, self._stop = start_system_postgres(self.bindir, self.workdir)
        except ServiceError as exc:
            shutil.rmtree(self.workdir, ignore_errors=True)
            pytest.fail(f"the throwaway PostgreSQL did not start: {exc}")
        self.restarts = 0

    def pg_ctl(self, *args: str) -> None:
        data = self.workdir / "pgdata"
        run(as_user(self.user, [str(self.bindir / "pg_ctl"), "-D", str(data), *args]))

    def crash(self) -> None:
        """Immediate stop: every connection is cut, mid-query or not."""
        self.pg_ctl("-m", "immediate", "stop")

    def start_again(self) -> None:
        """Start with the options of the first start (``pg_ctl restart`` reuses
        them from postmaster.opts, and starts a stopped server)."""
        self.pg_ctl("-w", "-l", str(self.workdir / "postgres.log"), "restart")
        self.restarts += 1

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def as_json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None
