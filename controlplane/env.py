"""Reading Berth's settings from environment variables.

Every reader names the variable in its error so that a bad deployment stops at
start-up with a message an operator can act on, instead of failing later in a
request. Values may also come from a file: ``NAME_FILE=/run/secrets/x`` is read
when ``NAME`` itself is unset (the Docker/Kubernetes secrets convention).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, parse_qsl, unquote, urlsplit


class ConfigError(Exception):
    """A setting has a value Berth cannot run with."""


@contextmanager
def exit_on_config_error() -> Iterator[None]:
    """Turn a ConfigError into one line on stderr and an exit, for every entry
    point (manage.py, gunicorn, celery), instead of a traceback."""
    try:
        yield
    except ConfigError as exc:
        sys.stderr.write(f"berth: configuration error: {exc}\n")
        sys.exit(2)


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class Env:
    """Typed access to a mapping of environment variables."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ

    def raw(self, name: str) -> str | None:
        """The value of ``name``, or the content of the file ``name_FILE`` names."""
        if name in self._environ:
            return self._environ[name]
        file_name = self._environ.get(f"{name}_FILE")
        if file_name:
            try:
                return Path(file_name).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigError(
                    f"{name}_FILE={file_name!r} cannot be read ({exc.strerror}); "
                    f"point it at a readable file or set {name} directly"
                ) from exc
        return None

    def text(self, name: str, default: str) -> str:
        value = self.raw(name)
        return default if value is None else value

    def flag(self, name: str, default: bool) -> bool:
        value = self.raw(name)
        if value is None:
            return default
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ConfigError(f"{name}={value!r} is not a boolean: use one of 1/0, true/false, yes/no")

    def number(self, name: str, default: int, *, minimum: int | None = None) -> int:
        value = self.raw(name)
        if value is None:
            return default
        try:
            number = int(value.strip())
        except ValueError:
            raise ConfigError(f"{name}={value!r} is not a whole number") from None
        if minimum is not None and number < minimum:
            raise ConfigError(f"{name}={number} is too small: it must be at least {minimum}")
        return number

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        value = self.raw(name)
        if value is None:
            return default
        cleaned = value.strip().lower()
        if cleaned not in choices:
            raise ConfigError(f"{name}={value!r} is not supported: use one of {', '.join(choices)}")
        return cleaned

    def items(self, name: str, default: list[str]) -> list[str]:
        value = self.raw(name)
        if value is None:
            return list(default)
        return [item.strip() for item in value.split(",") if item.strip()]


DATABASE_SCHEMES = ("postgres", "postgresql", "sqlite")


def _split(name: str, url: str) -> SplitResult:
    """urlsplit, with its errors (bad IPv6 brackets, bad ports) naming the variable."""
    try:
        parts = urlsplit(url)
        parts.hostname  # noqa: B018  (parsed lazily; raises on a malformed host)
    except ValueError as exc:
        raise ConfigError(f"{name}={_redact_text(url)!r} is not a valid URL ({exc})") from None
    try:
        parts.port  # noqa: B018
    except ValueError:
        raise ConfigError(f"{name}={_redact(url)!r} has a port that is not a number") from None
    return parts


def sqlite_database(path: Path) -> dict[str, Any]:
    """The Django entry for an embedded SQLite file.

    IMMEDIATE transactions take the write lock when they begin, so concurrent
    writers wait (up to the timeout) instead of failing with "database is locked"
    when a read turns into a write; WAL lets readers run beside the writer."""
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(path),
        "OPTIONS": {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
    }


def parse_database_url(name: str, url: str) -> dict[str, Any]:
    """Turn ``postgres://user:pass@host:port/db?opt=v`` or ``sqlite:///path`` into a
    Django ``DATABASES`` entry. ``?host=/run/postgresql`` selects a Unix socket dir."""
    parts = _split(name, url)
    scheme = parts.scheme.lower()
    if scheme not in DATABASE_SCHEMES:
        raise ConfigError(
            f"{name}={_redact(url)!r} has scheme {parts.scheme!r}: use "
            "postgres://user:password@host:5432/dbname or sqlite:///path/to/file.sqlite3"
        )
    if scheme == "sqlite":
        # sqlite:////abs/path: three slashes, then the absolute path.
        path = unquote(parts.path)[1:]
        if parts.netloc or not path.startswith("/") or path == "/":
            raise ConfigError(
                f"{name}={url!r} needs an absolute file path: sqlite:////abs/path.sqlite3 "
                "(three slashes, then the path)"
            )
        return sqlite_database(Path(path))

    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    host = unquote(parts.hostname or "") if parts.hostname else ""
    socket_dir = options.pop("host", "")
    port = parts.port
    database = unquote(parts.path.lstrip("/"))
    if not database:
        raise ConfigError(
            f"{name}={_redact(url)!r} names no database: add it after the host, "
            "e.g. postgres://berth@127.0.0.1:5432/berth"
        )
    if not host and not socket_dir:
        raise ConfigError(
            f"{name}={_redact(url)!r} names no host: give host[:port], or a socket "
            "directory with ?host=/run/postgresql"
        )
    port_option = options.pop("port", "")
    if port_option and not port_option.isdigit():
        raise ConfigError(f"{name}={_redact(url)!r} has a port that is not a number")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": database,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": socket_dir or host,
        "PORT": str(port or port_option or ""),
        "OPTIONS": options,
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
    }


BROKER_SCHEMES = ("redis", "rediss", "amqp", "amqps", "memory")


def parse_broker_url(name: str, url: str) -> str:
    """Check a Celery broker URL has a scheme Berth supports and a host."""
    parts = _split(name, url)
    scheme = parts.scheme.lower()
    if scheme not in BROKER_SCHEMES:
        raise ConfigError(
            f"{name}={_redact(url)!r} has scheme {parts.scheme!r}: use "
            "redis://host:6379/0 (or rediss://, amqp://)"
        )
    if scheme != "memory" and not parts.hostname:
        raise ConfigError(f"{name}={_redact(url)!r} names no host: e.g. redis://127.0.0.1:6379/0")
    return url


def _redact_text(url: str) -> str:
    """Mask what looks like a password in a URL too broken to parse."""
    scheme, sep, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not (sep and at and ":" in userinfo):
        return url
    return f"{scheme}://{userinfo.split(':', 1)[0]}:***@{host}"


def _redact(url: str) -> str:
    """The URL with its password masked, fit for an error message."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()
