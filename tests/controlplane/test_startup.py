"""Start-up from the environment, run as real processes: the embedded defaults,
and a bad value stopping start-up with a message that names the variable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BERTH_VARS = (
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "BERTH_CLUSTER",
    "BERTH_SECRET_KEY",
    "BERTH_DEBUG",
    "BERTH_DATA_DIR",
    "REDIS_URL",
)

SHOW_SETTINGS = (
    "import json, django; django.setup(); from django.conf import settings as s; "
    "print(json.dumps({'engine': s.DATABASES['default']['ENGINE'], "
    "'db': str(s.DATABASES['default']['NAME']), 'eager': s.CELERY_TASK_ALWAYS_EAGER, "
    "'broker': s.CELERY_BROKER_URL, 'cluster': s.BERTH_CLUSTER}))"
)

# Eight admins saving at once on the embedded SQLite database.
CONCURRENT_WRITES = """
import threading, django
django.setup()
from django.core.management import call_command
from django.db import connection
call_command("migrate", verbosity=0)
from queues import services
outcomes = []
def write(index):
    try:
        services.priority_classes.create(actor=None, data={"name": f"p{index}", "value": index})
        outcomes.append("ok")
    except Exception as exc:
        outcomes.append(repr(exc))
    finally:
        connection.close()
threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
print(sorted(outcomes))
"""


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in BERTH_VARS}
    env["BERTH_DATA_DIR"] = str(tmp_path / "data")
    env["DJANGO_SETTINGS_MODULE"] = "controlplane.settings"
    env.update(extra)
    return env


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_no_variables_means_embedded(tmp_path: Path) -> None:
    result = run(["-c", SHOW_SETTINGS], clean_env(tmp_path))
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown == {
        "engine": "django.db.backends.sqlite3",
        "db": str(tmp_path / "data" / "berth.sqlite3"),
        "eager": True,
        "broker": "memory://localhost/",
        "cluster": "simulated",
    }
    key_file = tmp_path / "data" / "secret_key"
    assert key_file.exists() and oct(key_file.stat().st_mode & 0o777) == "0o600"


def test_embedded_sqlite_serialises_concurrent_writers(tmp_path: Path) -> None:
    result = run(["-c", CONCURRENT_WRITES], clean_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(["ok"] * 8)


def test_full_stack_variables_are_used(tmp_path: Path) -> None:
    env = clean_env(
        tmp_path,
        DATABASE_URL="postgresql://berth@db:5432/berth",
        CELERY_BROKER_URL="redis://redis:6379/0",
        BERTH_CLUSTER="kubernetes",
    )
    shown = json.loads(run(["-c", SHOW_SETTINGS], env).stdout)
    assert shown["engine"] == "django.db.backends.postgresql"
    assert (shown["eager"], shown["broker"], shown["cluster"]) == (
        False,
        "redis://redis:6379/0",
        "kubernetes",
    )


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "BERTH_CLUSTER",
            "nomad",
            "BERTH_CLUSTER='nomad' is not supported: use one of simulated, kubernetes",
        ),
        ("DATABASE_URL", "mysql://x@y/z", "DATABASE_URL='mysql://x@y/z' has scheme 'mysql'"),
        ("CELERY_BROKER_URL", "redis://", "CELERY_BROKER_URL='redis://' names no host"),
        ("BERTH_DEBUG", "perhaps", "BERTH_DEBUG='perhaps' is not a boolean"),
        ("BERTH_PURE_ENGINE", "compiled", "BERTH_PURE_ENGINE='compiled' is not a boolean"),
        ("BERTH_SECRET_KEY", "short", "BERTH_SECRET_KEY is too short"),
        ("BERTH_AUDIT_RETENTION_DAYS", "0", "BERTH_AUDIT_RETENTION_DAYS=0 is too small"),
        (
            "PROMETHEUS_URL",
            "prometheus:9090",
            "PROMETHEUS_URL='prometheus:9090' is not an http(s) URL",
        ),
        ("BERTH_NODE_GPUS", "0", "BERTH_NODE_GPUS=0 is too small"),
        (
            "BERTH_APPROVAL_WEBHOOK_URL",
            "hooks.slack.com/services/x",
            "BERTH_APPROVAL_WEBHOOK_URL='hooks.slack.com/services/x' is not an http(s) URL",
        ),
        ("BERTH_APPROVAL_TIMEOUT", "30", "BERTH_APPROVAL_TIMEOUT=30 is too small"),
        ("BERTH_APPROVAL_GRACE", "-1", "BERTH_APPROVAL_GRACE=-1 is too small"),
        (
            "DATABASE_URL",
            "postgresql://u@[::1/db",
            "DATABASE_URL='postgresql://u@[::1/db' is not a valid URL",
        ),
        (
            "CELERY_BROKER_URL",
            "redis://[bad",
            "CELERY_BROKER_URL='redis://[bad' is not a valid URL",
        ),
        ("BERTH_ALLOWED_HOSTS", "", "BERTH_ALLOWED_HOSTS is empty"),
        (
            "BERTH_DATA_DIR",
            "/proc/berth",
            "BERTH_DATA_DIR='/proc/berth': '/proc/berth' cannot be created",
        ),
    ],
)
def test_bad_value_stops_start_up_naming_the_variable(
    tmp_path: Path, variable: str, value: str, message: str
) -> None:
    env = clean_env(tmp_path, **{variable: value})
    env.setdefault("BERTH_SECRET_KEY", "k" * 40)  # so an unusable data dir is the only problem
    result = run(["manage.py", "check"], env)
    assert result.returncode == 2
    assert result.stderr.startswith("berth: configuration error: ")
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_celery_worker_refuses_a_bad_setting_in_one_line(tmp_path: Path) -> None:
    celery = str(Path(sys.executable).parent / "celery")
    result = subprocess.run(
        [celery, "-A", "controlplane", "worker"],
        cwd=ROOT,
        env=clean_env(tmp_path, BERTH_CLUSTER="nomad"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "berth: configuration error: BERTH_CLUSTER='nomad' is not supported: use one of "
        "simulated, kubernetes"
    )


def test_the_system_checks_pass_in_a_fresh_process(tmp_path: Path) -> None:
    """``manage.py check`` as ``make run`` and gunicorn start it: a fresh import
    order (the suite's own imports can hide an import cycle)."""
    done = run(["manage.py", "check"], clean_env(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
