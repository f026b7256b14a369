"""Syncs never overlap: one that finds another running skips at once, so slow
syncs do not stack up behind each other; beat's messages expire after an
interval, so a stopped worker does not come back to a backlog."""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings
from django.db import connection

from cluster.tasks import SYNC_LOCK, sync_cluster
from queues.locks import try_lock


def test_a_sync_skips_while_another_runs(db: Any) -> None:
    held, release, done = threading.Event(), threading.Event(), threading.Event()

    def other_sync() -> None:  # another worker's sync, on its own connection
        try:
            with try_lock(SYNC_LOCK) as taken:
                assert taken
                held.set()
                release.wait(10)
        finally:
            connection.close()
            done.set()

    threading.Thread(target=other_sync, daemon=True).start()
    assert held.wait(10)
    try:
        assert sync_cluster() == {"skipped": "another sync is still running"}
    finally:
        release.set()
        assert done.wait(10)
    ran = sync_cluster()
    assert "skipped" not in ran


def test_beat_drops_a_sync_not_started_within_its_interval() -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["sync-cluster"]
    assert entry["options"]["expires"] == settings.BERTH_SYNC_INTERVAL
