"""PostgreSQL crashing under load (an immediate stop of a throwaway server,
which cuts every connection mid-query, then a start), twice: while it is
down, Berth answers 503 with Retry-After (JSON under /api/, a page
elsewhere), never a 500 and never a wrong answer (a 401 for a good token, an
empty list, a missing job); once it is back, the same gunicorn answers again
with nothing restarted, and every job it said it stored is there.

Berth runs as in production: gunicorn (two sync workers) on the throwaway
PostgreSQL, migrated by Berth's own migrations and seeded by its services.
Clients keep asking throughout: the API list and detail, a page, and
submissions."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from scripts.test_services import free_port
from tests.chaos.figures import report
from tests.chaos.harness import (
    ROOT,
    Process,
    ThrowawayPostgres,
    as_json,
    berth_env,
    gunicorn,
    http,
    tail,
    wait,
    wait_for_web,
)
from tests.jobs.conftest import job

pytestmark = pytest.mark.worker

OUTAGES = 2
DOWN_SECONDS = 2.0  # how long each crash keeps PostgreSQL down
CLIENTS = 3
AFTER_RECOVERY = 2.5  # seconds of load after each recovery, all of it answered


@dataclass
class Seen:
    """One answer: when, to what, and whether it was right."""

    at: float
    what: str
    status: int
    problem: str = ""
    retry_after: str = ""


@dataclass
class Load:
    base: str
    token: str
    session: str
    jobs: dict[str, str]  # id -> name, stored before the load
    seen: list[Seen] = field(default_factory=list)
    stored: dict[str, str] = field(default_factory=dict)  # names answered 201 -> id
    unsure: list[str] = field(default_factory=list)  # names answered 503
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    counter: int = 0

    def run(self, client: int) -> None:
        step = 0
        while not self.stop.is_set():
            getattr(self, ("detail", "listing", "page", "submit")[step % 4])(client)
            step += 1
            time.sleep(0.02)

    def note(self, what: str, status: int, headers: dict[str, str], problem: str) -> None:
        if status == 503:
            problem = problem or _bad_503(what, headers)
        elif status >= 500 or status == 0:
            problem = problem or f"answered {status}"
        with self.lock:
            self.seen.append(
                Seen(time.monotonic(), what, status, problem, headers.get("Retry-After", ""))
            )

    def detail(self, client: int) -> None:
        job_id, name = next(iter(self.jobs.items()))
        status, headers, body = http("GET", f"{self.base}/api/v1/jobs/{job_id}/", self.token)
        data = as_json(body) or {}
        problem = ""
        if status == 200 and data.get("name") != name:
            problem = f"job {job_id} answered as {data.get('name')!r}"
        elif status not in (200, 503):
            problem = f"answered {status}: {body[:200]!r}"
        self.note("api-detail", status, headers, problem)

    def listing(self, client: int) -> None:
        status, headers, body = http("GET", f"{self.base}/api/v1/jobs/", self.token)
        data = as_json(body) or {}
        problem = ""
        if status == 200 and int(data.get("count") or -1) < len(self.jobs):
            problem = f"the list counts {data.get('count')} jobs"
        elif status not in (200, 503):
            problem = f"answered {status}: {body[:200]!r}"
        self.note("api-list", status, headers, problem)

    def page(self, client: int) -> None:
        # Oldest first: the seeded jobs stay on the first page however many the
        # load submits (newest first, 50 submissions push them off the page).
        request = f"{self.base}/jobs/?sort=submitted_at"
        status, headers, body = _page(request, self.session)
        problem = ""
        name = list(self.jobs.values())[-1]
        if status == 200 and name.encode() not in body:
            problem = f"{headers.get('X-Final-Url')} does not show {name}"
        elif status not in (200, 503):
            problem = f"answered {status}"
        self.note("page", status, headers, problem)

    def submit(self, client: int) -> None:
        with self.lock:
            self.counter += 1
            name = f"load-{client}-{self.counter}"
        status, headers, body = http(
            "POST",
            f"{self.base}/api/v1/jobs/",
            self.token,
            json.dumps(job(name=name)).encode(),
        )
        data = as_json(body) or {}
        problem = ""
        if status == 201:
            self.stored[name] = str(data.get("id"))
        elif status == 503:
            self.unsure.append(name)
        else:
            problem = f"answered {status}: {body[:200]!r}"
        self.note("api-submit", status, headers, problem)


def _page(url: str, session: str) -> tuple[int, dict[str, str], bytes]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, headers={"Cookie": f"sessionid={session}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            headers = {**dict(response.headers), "X-Final-Url": response.geturl()}
            return response.status, headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()
    except OSError:
        return 0, {}, b""


def _bad_503(what: str, headers: dict[str, str]) -> str:
    if not headers.get("Retry-After", "").isdigit():
        return "503 without Retry-After"
    kind = headers.get("Content-Type", "")
    if what.startswith("api") and not kind.startswith("application/json"):
        return f"an API 503 as {kind}"
    if what == "page" and not kind.startswith("text/html"):
        return f"a page 503 as {kind}"
    return ""


def _berth_command(env: dict[str, str], *argv: str) -> str:
    result = subprocess.run(
        [sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"{' '.join(argv)} failed:\n{result.stdout}{result.stderr}"
    return result.stdout


def test_postgresql_crashing_under_load_is_a_503_and_berth_recovers_by_itself(
    tmp_path: Path,
) -> None:
    database = ThrowawayPostgres()
    web: Process | None = None
    load: Load | None = None
    threads: list[threading.Thread] = []
    try:
        env = berth_env(tmp_path, DATABASE_URL=database.url, BERTH_CLUSTER="simulated")
        seeded = json.loads(_berth_command(env, "-m", "tests.chaos.outage_seed"))
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        web = gunicorn(env, tmp_path / "web.log", port).start()
        wait_for_web(base, web)
        master = web.process.pid if web.process else None
        load = Load(base, seeded["token"], seeded["session"], seeded["jobs"])
        threads = [threading.Thread(target=load.run, args=(n,)) for n in range(CLIENTS)]
        for thread in threads:
            thread.start()
        time.sleep(1.0)  # answered while PostgreSQL is up

        windows: list[tuple[float, float, float]] = []  # (crashed, started, recovered)
        for _ in range(OUTAGES):
            crashed = time.monotonic()
            database.crash()
            time.sleep(DOWN_SECONDS)
            database.start_again()
            started = time.monotonic()
            wait(
                lambda started=started: any(
                    s.at > started and s.status in (200, 201) for s in list(load.seen)
                ),
                lambda: f"Berth did not answer again after PostgreSQL came back:\n{tail(web.log)}",
                30,
            )
            recovered = min(
                s.at for s in list(load.seen) if s.at > started and s.status in (200, 201)
            )
            windows.append((crashed, started, recovered))
            time.sleep(AFTER_RECOVERY)
        load.stop.set()
        for thread in threads:
            thread.join(35)
        assert web.alive and web.process and web.process.pid == master, "gunicorn was restarted"

        # What it said it stored is there, once PostgreSQL is back.
        missing = []
        for name, job_id in load.stored.items():
            status, _, body = http("GET", f"{base}/api/v1/jobs/{job_id}/", load.token)
            if status != 200 or (as_json(body) or {}).get("name") != name:
                missing.append(f"{name} (#{job_id}): {status}")
        status, _, body = http("GET", f"{base}/api/v1/jobs/?limit=1000", load.token)
        listed = {row["name"] for row in (as_json(body) or {}).get("results", [])}
        stored_after_503 = sum(1 for name in load.unsure if name in listed)
    finally:
        if load is not None:
            load.stop.set()
        for thread in threads:
            thread.join(35)
        if web is not None:
            web.stop()
        database.close()

    seen = load.seen
    statuses = Counter(s.status for s in seen)
    problems = Counter(f"{s.what}: {s.problem}" for s in seen if s.problem)
    ends = [crashed for crashed, _, _ in windows[1:]] + [max(s.at for s in seen) + 1]
    unavailable_in_each = [
        sum(1 for s in seen if crashed <= s.at <= started and s.status == 503)
        for crashed, started, _ in windows
    ]
    # From a second after the first answer again until the next crash: all answered.
    late = [
        f"{s.what} {s.status} {s.at - recovered:.1f} s after recovery"
        for (_, _, recovered), end in zip(windows, ends, strict=True)
        for s in seen
        if recovered + 1 < s.at < end and s.status not in (200, 201)
    ]
    report(
        "postgresql",
        outages=OUTAGES,
        restarts=database.restarts,
        requests=len(seen),
        answered=dict(sorted(statuses.items())),
        answered_503_per_outage=unavailable_in_each,
        answered_5xx_other=sum(1 for s in seen if s.status >= 500 and s.status != 503),
        wrong_answers=sum(problems.values()),
        recovery_seconds=[round(r - s, 2) for _, s, r in windows],
        submitted_201=len(load.stored),
        submitted_503_but_stored=stored_after_503,
        missing_after_201=len(missing),
        gunicorn_restarts=web.starts - 1 if web else None,
    )
    assert problems == Counter(), f"wrong answers: {dict(problems)}\n{tail(tmp_path / 'web.log')}"
    assert all(n > 0 for n in unavailable_in_each), (
        f"an outage was not felt (503s per outage: {unavailable_in_each})"
    )
    assert set(statuses) <= {200, 201, 503}, dict(statuses)
    assert late == [], f"still failing after recovery: {late[:10]}"
    assert missing == [], f"answered 201 but not stored: {missing}"
