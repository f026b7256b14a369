"""The database a test runs on, for the processes it starts (workers, commands)."""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings


def worker_database_url() -> str:
    """This run's ``DATABASE_URL`` naming the test database. Host, port, user
    and query stay as given, so a socket-only server (``?host=/socket/dir``, as
    ``make test`` starts one) is reached the same way."""
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path="/" + settings.DATABASES["default"]["NAME"]))
