"""A pytest plugin for mutation runs only (``make mutation``, scripts/mutation.py).

mutmut runs a fresh pytest session for every mutant; with the suite's one new
database per process, each would spend most of its time migrating one. Here a
session takes one of a few database names, locked while it runs so two
mutants never share one, and creates it afresh as a copy of a template
database that scripts/mutation.py migrated once (PostgreSQL copies it in a
moment). Fresh each time: a session before it may have flushed the rows the
data migrations made, or been killed in the middle of a test. Tests that need
no database run first.

Active only when ``BERTH_MUTATION_DB_DIR`` (the folder for the locks) and
``BERTH_MUTATION_DB_TEMPLATE`` (the template's name) are set.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

import pytest

SLOTS = 8
_held: list[IO[str]] = []


def _take_slot(folder: Path) -> tuple[int, IO[str]]:
    for slot in range(SLOTS):
        lock = (folder / f"slot-{slot}.lock").open("a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        return slot, lock
    raise pytest.UsageError(f"all {SLOTS} mutation databases are in use ({folder})")


@pytest.hookimpl(trylast=True)  # after tests/conftest.py names its per-process database
def pytest_configure(config: pytest.Config) -> None:
    folder = os.environ.get("BERTH_MUTATION_DB_DIR")
    template = os.environ.get("BERTH_MUTATION_DB_TEMPLATE")
    if not folder or not template:
        return
    from django.conf import settings

    slot, lock = _take_slot(Path(folder))
    _held.append(lock)
    test = settings.DATABASES["default"].setdefault("TEST", {})
    test["NAME"] = f"test_berth_mutation_{slot}"
    test["TEMPLATE"] = template
    # Create it (dropping the last session's) but leave it behind: the next
    # session on this name drops it, and scripts/mutation.py drops them all.
    config.option.create_db = True
    config.option.reuse_db = True


@pytest.hookimpl(trylast=True)  # after pytest-django's order, which runs database tests first
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests without a database first: most mutants fail one in a moment, and
    the session (``-x``) stops before it has to create a database at all."""
    if not _held:
        return

    def order(item: pytest.Item) -> int:
        fixtures = getattr(item, "fixturenames", ())
        if "transactional_db" in fixtures or "live_server" in fixtures:
            return 2
        return 1 if "db" in fixtures or item.get_closest_marker("django_db") else 0

    items.sort(key=order)


def pytest_unconfigure(config: pytest.Config) -> None:
    if not _held:
        return
    from django.db import connections

    # mutmut forks each mutant's session from this process: no connection or
    # lock may be inherited.
    connections.close_all()
    _held.pop().close()
