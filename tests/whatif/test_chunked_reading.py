"""A window is read in chunks, on PostgreSQL: its workloads and events come
from server-side cursors a few rows at a time, and the stream built from them
is the same whatever the chunk size."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
from django.db import connection, transaction

from cluster.models import EventType, WorkloadEvent, WorkloadRecord
from cluster.models import WorkloadState as W
from jobs.models import JobRequest
from tests.jobs.conftest import GPU, Org, org
from tests.whatif.test_whatif_task import recorded
from tests.whatif.test_whatif_window import NOW, START, declare, prepared
from whatif.stream import Stream, recorded_stream, window_rows
from whatif.window_history import carried_over

__all__ = ["org"]

MINUTE = timedelta(minutes=1)
TABLES = (WorkloadRecord._meta.db_table, WorkloadEvent._meta.db_table, JobRequest._meta.db_table)


def busy_window() -> None:
    """Seven workloads created in the window (one that never ran, one with an
    approval, one a Berth job) and four from before it, each with events: more
    of both than a chunk of 2, so every read crosses chunk boundaries."""
    before = START - timedelta(hours=1)
    running = recorded("research", "old-running", created=before, runtime=2 * 3600)
    WorkloadRecord.objects.filter(pk=running.pk).update(flavors={"main": {GPU: "h100"}})
    WorkloadEvent.objects.create(workload=running, type=EventType.QUOTA_RESERVED, at=before)
    WorkloadEvent.objects.create(workload=running, type=EventType.ADMITTED, at=before)
    WorkloadEvent.objects.create(workload=running, type=EventType.FINISHED, at=START + 60 * MINUTE)
    evicted = recorded("research", "old-evicted", created=before + MINUTE, runtime=None)
    WorkloadEvent.objects.create(workload=evicted, type=EventType.ADMITTED, at=before + MINUTE)
    WorkloadEvent.objects.create(workload=evicted, type=EventType.EVICTED, at=START + 5 * MINUTE)
    queued = recorded("research", "old-queued", created=before + 2 * MINUTE, admitted=False)
    WorkloadEvent.objects.create(workload=queued, type=EventType.CREATED, at=before + 2 * MINUTE)
    # Its record says still queued, its log says it finished before the window.
    gone = recorded("research", "old-gone", created=before + 3 * MINUTE, admitted=False)
    WorkloadEvent.objects.create(workload=gone, type=EventType.ADMITTED, at=before + 3 * MINUTE)
    WorkloadEvent.objects.create(workload=gone, type=EventType.FINISHED, at=before + 4 * MINUTE)

    for i in range(7):
        row = recorded("research", f"new-{i}", created=START + i * MINUTE, runtime=(i + 1) * 600)
        WorkloadEvent.objects.create(workload=row, type=EventType.ADMITTED, at=row.created_at)
    # new-2 waited a minute for an approval once it held quota.
    approved = WorkloadRecord.objects.get(name="new-2")
    WorkloadRecord.objects.filter(pk=approved.pk).update(
        admission_checks={"urgent": {"state": "Ready"}}, admitted_at=START + 3 * MINUTE
    )
    WorkloadEvent.objects.filter(workload=approved).update(at=START + 3 * MINUTE)
    WorkloadEvent.objects.create(
        workload=approved, type=EventType.QUOTA_RESERVED, at=START + 2 * MINUTE
    )
    declared = WorkloadRecord.objects.get(name="new-4")
    WorkloadRecord.objects.filter(pk=declared.pk).update(
        admitted_at=None, finished_at=None, state=W.PENDING
    )
    WorkloadEvent.objects.filter(workload=declared).delete()
    declare(declared, expected_runtime_seconds=1800, checkpoint_interval_seconds=600)
    WorkloadRecord.objects.filter(name="new-6").update(
        admitted_at=None, finished_at=None, state=W.DELETED
    )


def built(stream: Stream) -> dict[str, Any]:
    return {
        "workloads": stream.build(),  # keys, order, creation times, runtimes, admissions
        "count": stream.count,
        "context": stream.context,
        "recorded": stream.recorded,
        "check_delays": stream.check_delays,
        "sources": stream.runtime_sources,
        "skipped": stream.skipped,
        "notes": stream.notes,
        "horizon": stream.horizon,
    }


def test_a_window_read_two_rows_at_a_time_replays_as_read_at_once(org: Org) -> None:
    busy_window()
    policy = prepared().today
    whole = built(recorded_stream(START, NOW, policy, observed=NOW))
    for chunk_size in (1, 2, 3):
        chunked = built(recorded_stream(START, NOW, policy, observed=NOW, chunk_size=chunk_size))
        assert chunked == whole, chunk_size
    # And what was read is the window: the equality above is not of two empty streams.
    keys = [w.key for w, _ in whole["workloads"]]
    assert keys == [
        "research/old-running",
        "research/old-evicted",
        "research/old-queued",
        *(f"research/new-{i}" for i in range(6)),  # new-6 never ran: left out
    ]
    assert whole["context"] == {
        "research/old-running",
        "research/old-evicted",
        "research/old-queued",
    }
    assert whole["count"] == 6 and whole["skipped"]["never_ran"] == 1
    assert whole["check_delays"] == {"research/new-2": 60.0}
    assert whole["sources"]["job"] == 1
    workloads = {w.key: w for w, _ in whole["workloads"]}
    # old-running holds h100 from before the window until its logged finish.
    assert workloads["research/old-running"].admitted_at == -3600
    assert workloads["research/old-running"].runtime == 2 * 3600
    assert workloads["research/old-queued"].admitted_at is None


def open_cursors() -> list[str]:
    """The statements of this session's open server-side cursors."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_cursors")
        return [statement for (statement,) in cursor.fetchall()]


def reading(table: str) -> Callable[[str], bool]:
    return lambda statement: f'FROM "{table}"' in statement


def test_window_rows_come_from_an_open_server_side_cursor(org: Org) -> None:
    for i in range(7):
        recorded("research", f"new-{i}", created=START + i * MINUTE)
    with transaction.atomic():
        rows = window_rows(START, NOW, chunk_size=2)
        taken = [next(rows).name for _ in range(3)]
        # Three rows in, the cursor is still open with the rest behind it.
        assert taken == ["new-0", "new-1", "new-2"]
        assert any(map(reading(WorkloadRecord._meta.db_table), open_cursors()))
        assert [row.name for row in rows] == [f"new-{i}" for i in range(3, 7)]
        assert open_cursors() == []  # read to the end: closed


def test_the_work_before_the_window_is_read_beside_its_events_by_two_cursors(org: Org) -> None:
    busy_window()
    with transaction.atomic():
        carried = carried_over(START, chunk_size=2)
        first = next(carried)
        assert first.row.name == "old-running" and first.release_kind == EventType.FINISHED
        cursors = open_cursors()
        assert any(map(reading(WorkloadRecord._meta.db_table), cursors))
        assert any(map(reading(WorkloadEvent._meta.db_table), cursors))
        rest = {at_start.row.name: at_start for at_start in carried}
        assert open_cursors() == []
    assert set(rest) == {"old-evicted", "old-queued"}  # old-gone finished before
    assert rest["old-evicted"].release_kind == EventType.EVICTED
    assert rest["old-queued"].admitted is None


def test_every_read_of_workloads_events_and_jobs_goes_through_a_server_side_cursor(
    org: Org,
) -> None:
    busy_window()
    policy = prepared().today
    reads: list[tuple[str, bool]] = []

    def watch(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if sql.lstrip().upper().startswith("SELECT") and any(f'"{t}"' in sql for t in TABLES):
            reads.append((sql, isinstance(context["cursor"].cursor, psycopg.ServerCursor)))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(watch):
        recorded_stream(START, NOW, policy, observed=NOW, chunk_size=2)
    # Window rows, the rows before it and their events, declarations, first
    # admissions, and check delays before and in the window.
    assert len(reads) >= 7
    assert [sql for sql, by_cursor in reads if not by_cursor] == []
