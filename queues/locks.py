"""Named locks held across processes: a PostgreSQL session advisory lock, or a
process lock on SQLite (the embedded mode runs one process)."""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

_local_locks: dict[str, threading.Lock] = {}
_guard = threading.Lock()


@contextmanager
def try_lock(name: str) -> Iterator[bool]:
    """Yields whether the lock was taken; never waits."""
    if connection.vendor == "postgresql":
        key = zlib.crc32(name.encode())
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
            taken = bool(cursor.fetchone()[0])
        try:
            yield taken
        finally:
            if taken:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
        return
    with _guard:
        lock = _local_locks.setdefault(name, threading.Lock())
    taken = lock.acquire(blocking=False)
    try:
        yield taken
    finally:
        if taken:
            lock.release()
