"""A pytest plugin for mutation runs only (``make mutation``, scripts/mutation.py).

mutmut runs a fresh pytest session for every mutant; with the suite's one new
database per process, each would spend most of its time migrating one. Here a
session takes one of a few databases kept between sessions (``--reuse-db``),
locked while it runs so two mutants never share one. A session that did not
end cleanly (a mutant killed on its timeout) leaves its database marked dirty,
and the next session on it creates it afresh.

Active only when ``BERTH_MUTATION_DB_DIR`` names the folder for its locks.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO, Any

import pytest

SLOTS = 8
_held: dict[str, Any] = {}


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
    if not folder:
        return
    from django.conf import settings

    slot, lock = _take_slot(Path(folder))
    dirty = Path(folder) / f"slot-{slot}.dirty"
    if dirty.exists():
        config.option.create_db = True
    dirty.touch()
    _held.update(lock=lock, dirty=dirty)
    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = f"test_berth_mutation_{slot}"
    config.option.reuse_db = True


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _held and exitstatus in (0, 1, 5):  # the tests ran, each undone by its teardown
        _held["dirty"].unlink(missing_ok=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    if not _held:
        return
    from django.db import connections

    # mutmut forks each mutant's session from this process: no connection or
    # lock may be inherited.
    connections.close_all()
    _held.pop("lock").close()
    _held.clear()
