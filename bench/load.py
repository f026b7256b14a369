"""Throughput and latency under concurrency, against gunicorn, at the size of a
busy cluster's history (bounded, loopback only).

Builds the demo organisation with JOBS job requests (one Workload record and
one event each; a few hundred live), starts gunicorn on loopback with debug off
(as the image runs it), then drives each page from CLIENTS concurrent clients
(threads with keep-alive connections) for SECONDS and prints requests per
second, p50/p95/p99 latency and any non-200 answers:

- ``GET /api/v1/jobs/`` as an admin (all jobs) and as a team member;
- ``GET /api/v1/cluster-queues/`` as the member;
- the overview ``/`` and the queue list ``/queues/`` as the member, signed in.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/load.py

It creates a scratch database ``berth_bench_<pid>`` and drops it at the end.
The load generator shares the machine's cores with the server, so the figures
are a floor. Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from api import build
from org import with_scratch_database

ROOT = Path(__file__).resolve().parents[1]
GOALS = {"jobs (admin)": 200.0, "jobs (member)": 200.0, "overview": 100.0}


@dataclass
class Target:
    label: str
    path: str
    headers: dict[str, str]


@dataclass
class Outcome:
    latencies: list[float] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_gunicorn(port: int, workers: int) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    # The same data dir (and so the same generated secret key) as this process,
    # so the session made here is valid there.
    env.update(BERTH_DEBUG="false", BERTH_ALLOWED_HOSTS="127.0.0.1")
    command = [
        str(ROOT / ".venv" / "bin" / "gunicorn"),
        "controlplane.wsgi:application",
        "--preload",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--no-control-socket",
        "--log-level",
        "warning",
    ]
    server = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"bench: gunicorn exited with {server.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return server
        except OSError:
            time.sleep(0.2)
    stop(server)
    raise SystemExit("bench: gunicorn did not start listening within 60 s")


def stop(server: subprocess.Popen[bytes]) -> None:
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def get(connection: http.client.HTTPConnection, target: Target) -> tuple[int, float]:
    started = time.perf_counter()
    connection.request("GET", target.path, headers=target.headers)
    response = connection.getresponse()
    response.read()
    return response.status, time.perf_counter() - started


def drive(port: int, target: Target, clients: int, seconds: float) -> tuple[Outcome, float]:
    """CLIENTS threads, each sending one request after another for SECONDS."""
    outcome = Outcome()
    lock = threading.Lock()
    start = threading.Event()
    deadline = [0.0]

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine: list[float] = []
        failures: dict[str, int] = {}
        start.wait()
        while time.perf_counter() < deadline[0]:
            try:
                status, elapsed = get(connection, target)
            except (OSError, http.client.HTTPException) as error:
                failures[type(error).__name__] = failures.get(type(error).__name__, 0) + 1
                connection.close()
                continue
            if status == 200:
                mine.append(elapsed)
            else:
                failures[str(status)] = failures.get(str(status), 0) + 1
        connection.close()
        with lock:
            outcome.latencies.extend(mine)
            for key, count in failures.items():
                outcome.failures[key] = outcome.failures.get(key, 0) + count

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    began = time.perf_counter()
    deadline[0] = began + seconds
    start.set()
    for thread in threads:
        thread.join()
    return outcome, time.perf_counter() - began


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def credentials() -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """Bearer headers for the admin and the member, and the member's session cookie."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    from accounts.services import create_token

    users = get_user_model().objects
    admin = create_token(user=users.get(username="admin"), name="load").secret
    member_user = users.get(username="bench-member")
    member = create_token(user=member_user, name="load").secret
    browser = Client()
    browser.force_login(member_user)
    session = browser.cookies[settings.SESSION_COOKIE_NAME].value
    return (
        {"Authorization": f"Bearer {admin}"},
        {"Authorization": f"Bearer {member}"},
        {"Cookie": f"{settings.SESSION_COOKIE_NAME}={session}"},
    )


def run(
    jobs: int, clients: list[int], seconds: float, workers: int, only: set[str], fresh: bool
) -> None:
    from jobs.models import JobRequest

    started = time.perf_counter()
    if fresh:
        build(jobs, jobs)
    print(f"built in {time.perf_counter() - started:.0f} s: {JobRequest.objects.count():,} jobs")
    admin, member, page = credentials()
    targets = [
        # The floor: what gunicorn and this load generator manage with no work behind.
        Target("healthz", "/healthz", {}),
        Target("jobs (admin)", "/api/v1/jobs/", admin),
        Target("jobs (member)", "/api/v1/jobs/", member),
        Target("cluster queues", "/api/v1/cluster-queues/", member),
        Target("overview", "/", page),
        Target("queue list", "/queues/", page),
    ]
    targets = [t for t in targets if not only or t.label in only]
    port = free_port()
    from django.db import connections

    connections.close_all()  # gunicorn's workers open their own
    server = start_gunicorn(port, workers)
    try:
        print(
            f"\ngunicorn: {workers} sync workers on 127.0.0.1:{port}, debug off; "
            f"{seconds:.0f} s per case after a warm-up; {os.cpu_count()} cores shared with the "
            "load generator"
        )
        header = f"{'page':<16}{'clients':>8}{'req/s':>9}{'p50 ms':>9}{'p95 ms':>9}"
        print(header + f"{'p99 ms':>9}{'errors':>8}  goal")
        for target in targets:
            drive(port, target, 2, 2.0)  # warm each worker's caches and connections
            for count in clients:
                outcome, elapsed = drive(port, target, count, seconds)
                rate = len(outcome.latencies) / elapsed
                errors = sum(outcome.failures.values())
                goal = GOALS.get(target.label)
                verdict = ""
                if goal is not None and count >= 50:
                    p99 = percentile(outcome.latencies, 0.99)
                    met = rate >= goal and p99 <= 1.0 and not errors
                    verdict = f"≥{goal:.0f} req/s, p99 ≤ 1 s: {'met' if met else 'NOT met'}"
                print(
                    f"{target.label:<16}{count:>8}{rate:>9.1f}"
                    f"{percentile(outcome.latencies, 0.50) * 1000:>9.0f}"
                    f"{percentile(outcome.latencies, 0.95) * 1000:>9.0f}"
                    f"{percentile(outcome.latencies, 0.99) * 1000:>9.0f}{errors:>8}  {verdict}",
                    flush=True,
                )
                if outcome.failures:
                    print(f"{'':<16}answers other than 200: {outcome.failures}")
    finally:
        stop(server)


def with_kept_database(name: str, run: Callable[[bool], None]) -> int:
    """Like ``org.with_scratch_database``, on a database that outlives the run:
    built when missing (``run(True)``), reused as it is otherwise."""
    base_url = os.environ.get("DATABASE_URL", "")
    if not base_url.startswith("postgres"):
        print("bench/load.py needs DATABASE_URL=postgresql://…", file=sys.stderr)
        return 2
    with psycopg.connect(base_url, autocommit=True) as conn:
        fresh = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if fresh is None:
            conn.execute(f'CREATE DATABASE "{name}"')
    os.environ["DATABASE_URL"] = urlunsplit(urlsplit(base_url)._replace(path=f"/{name}"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    os.environ.setdefault("BERTH_DATA_DIR", f"/tmp/{name}")
    os.environ["BERTH_ALLOWED_HOSTS"] = "testserver"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    run(fresh is None)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--clients", default="10,50", help="comma-separated client counts")
    parser.add_argument("--seconds", type=float, default=10.0, help="per page and client count")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers (the image's 3)")
    parser.add_argument("--only", default="", help="comma-separated page labels to run")
    parser.add_argument(
        "--keep",
        metavar="NAME",
        default="",
        help="build into database NAME once and keep it; later runs reuse it (drop it yourself)",
    )
    args = parser.parse_args()
    clients = [int(c) for c in args.clients.split(",") if c.strip()]
    only = {label.strip() for label in args.only.split(",") if label.strip()}
    if args.keep:
        return with_kept_database(
            args.keep,
            lambda fresh: run(args.jobs, clients, args.seconds, args.workers, only, fresh),
        )
    return with_scratch_database(
        "bench/load.py", lambda: run(args.jobs, clients, args.seconds, args.workers, only, True)
    )


if __name__ == "__main__":
    sys.exit(main())
