"""How many parts a what-if is dealt into (and how many replays a plan runs
at once) when no one set BERTH_REPLAY_WORKERS: the processes of the worker
pools that answer, asked of real Celery workers (subprocesses of this
checkout on the test Redis): a prefork pool of 2 counts 2, a solo pool 1."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import override_settings

from tests.whatif.celery_workers import SOLO, celery_workers
from whatif.scaleout import _pool_size, replay_workers

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_the_workers_pool_processes_are_counted(tmp_path: Path) -> None:
    pools = {"forked": ("--pool=prefork", "--concurrency=2"), "solo": SOLO}
    with celery_workers(tmp_path, pools), override_settings(BERTH_REPLAY_WORKERS=0):
        assert replay_workers() == 3


def test_a_pool_that_does_not_say_its_size_counts_one() -> None:
    assert _pool_size({"pool": {"max-concurrency": 4}}) == 4
    assert _pool_size({"pool": {}}) == 1
    assert _pool_size({"pool": {"max-concurrency": 0}}) == 1
    assert _pool_size(None) == 1
