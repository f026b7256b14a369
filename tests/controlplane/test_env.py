"""Settings readers: each bad value names its variable and says what to do."""

from __future__ import annotations

import pytest

from controlplane.env import ConfigError, Env, parse_broker_url, parse_database_url


def test_postgres_url_becomes_django_database() -> None:
    db = parse_database_url(
        "DATABASE_URL", "postgres://berth:s%40cret@db.internal:6543/berth?sslmode=require"
    )
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["NAME"], db["USER"], db["PASSWORD"], db["HOST"], db["PORT"]) == (
        "berth",
        "berth",
        "s@cret",
        "db.internal",
        "6543",
    )
    assert db["OPTIONS"] == {"sslmode": "require"}


def test_postgres_url_with_socket_directory() -> None:
    db = parse_database_url(
        "DATABASE_URL", "postgresql://berth@/berth?host=/run/postgresql&port=5433"
    )
    assert (db["HOST"], db["PORT"], db["OPTIONS"]) == ("/run/postgresql", "5433", {})


def test_sqlite_url_needs_absolute_path() -> None:
    db = parse_database_url("DATABASE_URL", "sqlite:////var/lib/berth/db.sqlite3")
    assert db["NAME"] == "/var/lib/berth/db.sqlite3"
    # Writers queue for the lock instead of failing with "database is locked".
    assert db["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    with pytest.raises(ConfigError, match=r"DATABASE_URL.*absolute file path"):
        parse_database_url("DATABASE_URL", "sqlite://relative.db")


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("mysql://root@localhost/berth", "has scheme 'mysql'"),
        ("postgres://berth@localhost", "names no database"),
        ("postgres:///berth", "names no host"),
        ("postgres://berth@localhost:port/berth", "port that is not a number"),
        ("not a url", "has scheme ''"),
    ],
)
def test_malformed_database_url_is_refused(url: str, complaint: str) -> None:
    with pytest.raises(ConfigError) as excinfo:
        parse_database_url("DATABASE_URL", url)
    assert str(excinfo.value).startswith("DATABASE_URL=")
    assert complaint in str(excinfo.value)


def test_password_is_masked_in_errors() -> None:
    with pytest.raises(ConfigError) as excinfo:
        parse_database_url("DATABASE_URL", "postgres://berth:hunter2@localhost")
    assert "hunter2" not in str(excinfo.value)
    assert "***" in str(excinfo.value)


@pytest.mark.parametrize(
    "url",
    ["redis://127.0.0.1:6379/0", "rediss://r.internal:6380/1", "amqp://guest:guest@mq:5672//"],
)
def test_broker_urls_accepted(url: str) -> None:
    assert parse_broker_url("CELERY_BROKER_URL", url) == url


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("kafka://k:9092", "has scheme 'kafka'"),
        ("redis://", "names no host"),
        ("redis://localhost:abc/0", "port that is not a number"),
    ],
)
def test_bad_broker_url_refused(url: str, complaint: str) -> None:
    with pytest.raises(ConfigError, match=rf"CELERY_BROKER_URL=.*{complaint}"):
        parse_broker_url("CELERY_BROKER_URL", url)


def test_readers_name_the_variable() -> None:
    env = Env({"B": "maybe", "N": "ten", "SMALL": "0", "C": "mesos", "L": "a, b,,c"})
    with pytest.raises(ConfigError, match=r"^B='maybe' is not a boolean"):
        env.flag("B", False)
    with pytest.raises(ConfigError, match=r"^N='ten' is not a whole number"):
        env.number("N", 1)
    with pytest.raises(ConfigError, match=r"^SMALL=0 is too small: it must be at least 1"):
        env.number("SMALL", 1, minimum=1)
    with pytest.raises(
        ConfigError, match=r"^C='mesos' is not supported: use one of simulated, kubernetes"
    ):
        env.choice("C", "simulated", ("simulated", "kubernetes"))
    assert env.items("L", []) == ["a", "b", "c"]
    assert env.flag("MISSING", True) is True


def test_values_can_come_from_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    secret = tmp_path / "secret"
    secret.write_text("from-a-file\n")
    env = Env({"BERTH_SECRET_KEY_FILE": str(secret)})
    assert env.raw("BERTH_SECRET_KEY") == "from-a-file"
    with pytest.raises(ConfigError, match=r"^BERTH_SECRET_KEY_FILE='/nope' cannot be read"):
        Env({"BERTH_SECRET_KEY_FILE": "/nope"}).raw("BERTH_SECRET_KEY")
    # The variable itself wins over its _FILE.
    assert Env({"X": "direct", "X_FILE": str(secret)}).raw("X") == "direct"
