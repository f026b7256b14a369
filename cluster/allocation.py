"""GPU time held by workloads, counted for showback (``UsageRollup``) as sync
records it.

- When sync records a workload's admission, it opens an ``OpenAllocation``
  per GPU flavor: its GPUs, team, queue class, and when its quota was
  reserved (Kueue holds the quota from then; the admission checks of
  ``urgent-release`` pass while it is held).
- When sync records an eviction (a preemption or another), the allocation
  ends then; a preemption also records what had run since the admission
  (``PreemptionLoss``), from which the report works out the work lost since
  the last checkpoint.
- At every snapshot instant (``count_snapshot``), each allocation's time up
  to that instant goes into the daily rollup at the price in force then; an
  allocation whose workload ended without an eviction (finished, failed,
  deleted, deactivated) ends at the first such event; one that ended is
  counted to its end — less what a snapshot taken after the end counted
  already — and dropped. Busy GPUs are sampled at the same instants: each
  (ClusterQueue, flavor)'s busy GPUs, shared among its admitted workloads by
  their GPUs.

So the allocated GPU-seconds are exact (event times, not samples), and the
daily rows are at most one sync interval behind the cluster.

The rollups are added to with upserts (nothing read back), by the snapshot
step; the watch only opens and ends allocations, and both lock allocation rows
in id order.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Model

from cluster.models import (
    EventType,
    OpenAllocation,
    PreemptionLoss,
    QueueSnapshot,
    TeamBorrowingRollup,
    TeamBorrowingTotal,
    UsageRollup,
    WorkloadEvent,
    WorkloadRecord,
    WorkloadState,
)
from queues import prices
from queues.choices import PolicyKind
from queues.models import ClusterQueue, PolicyChange, ResourceFlavor, Team

GPU = "nvidia.com/gpu"
# States in which a workload holds its quota.
HOLDING = (WorkloadState.ADMITTED, WorkloadState.QUOTA_RESERVED)
# The first of these after its start ends an allocation (as a job's figures end
# an admitted stretch, jobs.follow).
ENDING = (
    EventType.EVICTED,
    EventType.PREEMPTED,
    EventType.FINISHED,
    EventType.FAILED,
    EventType.DEACTIVATED,
    EventType.DELETED,
)

UsageKey = tuple[date, str, str, str, str]  # month, team, queue class, flavor, price
# Rows per INSERT (SQLite, the embedded mode, takes at most 32,766 parameters).
UPSERT_BATCH = 500


# --------------------------------------------------------------------------- prices


@dataclass
class PriceBook:
    """Each flavor's price per GPU-hour over time, from the policy history:
    the price a change set is in force from that change until the next."""

    # flavor -> [(from, price text or "")], oldest first; the first from is None
    # (the price before the first recorded change).
    timelines: dict[str, list[tuple[datetime | None, str]]] = field(default_factory=dict)

    def price_at(self, flavor: str, at: datetime) -> str:
        timeline = self.timelines.get(flavor) or [(None, "")]
        starts = [moment for moment, _ in timeline[1:] if moment is not None]
        return timeline[bisect.bisect_right(starts, at)][1]

    def changes_between(self, flavor: str, start: datetime, end: datetime) -> list[datetime]:
        return [m for m, _ in (self.timelines.get(flavor) or [])[1:] if m and start < m < end]


def _price_of(snapshot: Any) -> str:
    if not isinstance(snapshot, Mapping):
        return ""
    price, errors = prices.parse_price(prices.FIELD, snapshot.get(prices.FIELD))
    return "" if errors or price is None else str(prices.price_text(price))


def price_book(flavors: Iterable[str]) -> PriceBook:
    """The price timelines of ``flavors``: from their history (a flavor
    created priced was priced from the start), else their current price."""
    names = sorted(set(flavors))
    changes: dict[str, list[tuple[datetime, Any, Any]]] = defaultdict(list)
    for name, at, before, after in (
        PolicyChange.objects.filter(kind=PolicyKind.RESOURCE_FLAVOR, object_name__in=names)
        .order_by("at", "id")
        .values_list("object_name", "at", "before", "after")
    ):
        changes[name].append((at, before, after))
    current = {
        name: prices.price_text(price)
        for name, price in ResourceFlavor.objects.filter(name__in=names).values_list(
            "name", "gpu_hour_price"
        )
    }
    book = PriceBook()
    for name in names:
        history = changes.get(name)
        if not history:
            book.timelines[name] = [(None, current.get(name) or "")]
            continue
        _, before, after = history[0]
        timeline: list[tuple[datetime | None, str]] = [
            (None, _price_of(before if before is not None else after))
        ]
        timeline += [(at, _price_of(after)) for at, _, after in history]
        book.timelines[name] = timeline
    return book


def month_of(moment: datetime) -> date:
    """The first day of ``moment``'s month (UTC, as Berth stores times)."""
    return moment.date().replace(day=1)


def _next_month(moment: datetime) -> datetime:
    first = month_of(moment)
    following = date(first.year + first.month // 12, first.month % 12 + 1, 1)
    return datetime.combine(following, time(), tzinfo=moment.tzinfo)


def pieces(
    book: PriceBook, flavor: str, start: datetime, end: datetime
) -> list[tuple[date, str, float]]:
    """[start, end) cut where a month begins (UTC) and where the price
    changes: (month, price, seconds) each. ``end`` before ``start`` gives the
    same pieces negative (time a snapshot counted past an end it had not seen
    yet)."""
    sign = 1.0
    if end < start:
        start, end, sign = end, start, -1.0
    found: list[tuple[date, str, float]] = []
    cuts = set(book.changes_between(flavor, start, end))
    moment = start
    while moment < end:
        cuts.add(min(_next_month(moment), end))
        moment = _next_month(moment)
    edge = start
    for cut in sorted(cuts | {end}):
        if cut <= edge:
            continue
        found.append(
            (month_of(edge), book.price_at(flavor, edge), sign * (cut - edge).total_seconds())
        )
        edge = cut
    return found


# --------------------------------------------------------------------------- events


def gpus_by_flavor(record: WorkloadRecord) -> dict[str, int]:
    """The GPUs a workload holds per flavor (pods admitted, partial admission
    counted); "" for GPUs whose flavor sync did not see."""
    found: dict[str, int] = defaultdict(int)
    for pod_set in record.pod_sets or []:
        per_pod = int((pod_set.get("requests") or {}).get(GPU, 0))
        count = int(pod_set.get("admitted_count", pod_set.get("count", 1)))
        if per_pod and count:
            flavor = (record.flavors or {}).get(pod_set.get("name", "main"), {}).get(GPU, "")
            found[str(flavor)] += per_pod * count
    if not found and record.gpus:
        found[""] = record.gpus
    return dict(found)


def _team_slug(record: WorkloadRecord) -> str:
    if record.team_id is None:
        return ""
    return str(Team.objects.filter(pk=record.team_id).values_list("slug", flat=True).first() or "")


def _queue_class(cluster_queue: str) -> str:
    found = (
        ClusterQueue.objects.filter(name=cluster_queue)
        .values_list("queue_class__name", flat=True)
        .first()
    )
    return str(found or "")


def open_allocation(record: WorkloadRecord, admitted: datetime) -> None:
    """Sync recorded ``record``'s admission at ``admitted``: its GPUs are
    allocated from its quota reservation on (unless they already are: a
    repeated Admitted with no eviction between keeps the first, as a job's
    figures do)."""
    held = gpus_by_flavor(record)
    if not held or not record.cluster_queue:
        return
    if OpenAllocation.objects.filter(uid=record.uid, ended_at__isnull=True).exists():
        return
    reserved = record.reserved_at
    # The reservation that led to this admission: never a later one (a replay).
    started = reserved if reserved is not None and reserved <= admitted else admitted
    team, queue_class = _team_slug(record), _queue_class(record.cluster_queue)
    for flavor, gpus in sorted(held.items()):
        try:
            with transaction.atomic():
                OpenAllocation.objects.create(
                    workload=record,
                    uid=record.uid,
                    team=team,
                    queue_class=queue_class,
                    cluster_queue=record.cluster_queue,
                    flavor=flavor,
                    gpus=gpus,
                    started_at=started,
                    admitted_at=admitted,
                    counted_until=started,
                )
        except IntegrityError:
            pass  # opened a moment ago by another sync


def end_allocation(
    record: WorkloadRecord, at: datetime, admitted: datetime | None, *, preempted: bool
) -> None:
    """Sync recorded ``record``'s eviction at ``at``: its allocations end then,
    and a preemption records what had run since ``admitted``."""
    allocations = list(
        OpenAllocation.objects.select_for_update()
        .filter(uid=record.uid, ended_at__isnull=True, started_at__lte=at)
        .order_by("id")
    )
    for allocation in allocations:
        allocation.ended_at = at
    OpenAllocation.objects.bulk_update(allocations, ["ended_at"])
    if not preempted or admitted is None:
        return
    held = {a.flavor: a.gpus for a in allocations} or gpus_by_flavor(record)
    if not held:
        return
    first = allocations[0] if allocations else None
    team = first.team if first else _team_slug(record)
    queue_class = first.queue_class if first else _queue_class(record.cluster_queue)
    book = price_book(held)
    for flavor, gpus in sorted(held.items()):
        PreemptionLoss.objects.get_or_create(
            uid=record.uid,
            at=at,
            flavor=flavor,
            defaults={
                "team": team,
                "queue_class": queue_class,
                "price": book.price_at(flavor, at),
                "gpus": gpus,
                "seconds": max(0.0, (at - admitted).total_seconds()),
                "namespace": record.namespace,
                "job_kind": record.job_kind,
                "job_name": record.job_name,
            },
        )


# --------------------------------------------------------------------------- snapshots


def _end_of(record: WorkloadRecord | None, allocation: OpenAllocation) -> datetime | None:
    """When an allocation no eviction ended did end: None while its workload
    still holds quota."""
    if record is not None and record.state in HOLDING:
        return None
    if record is not None:
        ending = (
            WorkloadEvent.objects.filter(
                workload=record, type__in=ENDING, at__gte=allocation.started_at
            )
            .order_by("at")
            .values_list("at", flat=True)
            .first()
        )
        if ending is not None:
            return ending
        if record.finished_at is not None and record.finished_at >= allocation.started_at:
            return record.finished_at
    # Gone without a trace of when: what was counted stands.
    return allocation.counted_until


def _add(rows: dict[UsageKey, dict[str, float]], key: UsageKey, **amounts: float) -> None:
    entry = rows.setdefault(key, {})
    for name, value in amounts.items():
        entry[name] = entry.get(name, 0.0) + value


def _busy_shares(
    snapshot_rows: list[QueueSnapshot], allocations: list[OpenAllocation], at: datetime
) -> dict[int, float]:
    """Busy GPUs per allocation at ``at``: each (ClusterQueue, flavor)'s busy
    GPUs shared among its admitted allocations by their GPUs."""
    busy = {
        (row.cluster_queue, row.flavor): float(row.utilised)
        for row in snapshot_rows
        if row.resource == GPU and row.utilised is not None
    }
    running: dict[tuple[str, str], list[OpenAllocation]] = defaultdict(list)
    for allocation in allocations:
        if allocation.admitted_at <= at:
            running[(allocation.cluster_queue, allocation.flavor)].append(allocation)
    shares: dict[int, float] = {}
    for key, members in running.items():
        if key not in busy:
            continue
        total = sum(a.gpus for a in members)
        for allocation in members:
            shares[allocation.pk] = busy[key] * allocation.gpus / total if total else 0.0
    return shares


def count_snapshot(
    snapshot_rows: list[QueueSnapshot], at: datetime, seconds: float, busy_source: str
) -> int:
    """At a new snapshot instant ``at``: count every allocation's time up to
    ``at`` (or its end), sample busy GPUs for ``seconds`` from the snapshot's
    GPU rows, and drop the allocations that ended. Returns the rows changed."""
    rows: dict[UsageKey, dict[str, float]] = {}
    with transaction.atomic():
        allocations = list(OpenAllocation.objects.select_for_update().order_by("id"))
        if not allocations:
            return 0
        records = {
            r.pk: r
            for r in WorkloadRecord.objects.filter(
                pk__in={a.workload_id for a in allocations if a.workload_id}
            ).only("id", "state", "finished_at")
        }
        book = price_book(a.flavor for a in allocations)
        ends = {
            a.pk: a.ended_at
            if a.ended_at is not None
            else _end_of(records.get(a.workload_id or 0), a)
            for a in allocations
        }
        live = [a for a in allocations if ends[a.pk] is None]
        shares = _busy_shares(snapshot_rows, live, at)
        done, moved = [], []  # ended and counted; counted up to ``at``
        for allocation in allocations:
            end = ends[allocation.pk]
            until = at if end is None else end
            if end is None and until < allocation.counted_until:
                until = allocation.counted_until  # a snapshot older than the last one
            for month, price, piece in pieces(
                book, allocation.flavor, allocation.counted_until, until
            ):
                key = (month, allocation.team, allocation.queue_class, allocation.flavor, price)
                _add(rows, key, gpu_seconds=piece * allocation.gpus)
            if allocation.pk in shares:
                key = (
                    month_of(at),
                    allocation.team,
                    allocation.queue_class,
                    allocation.flavor,
                    book.price_at(allocation.flavor, at),
                )
                _add(
                    rows,
                    key,
                    busy_gpu_seconds=shares[allocation.pk] * seconds,
                    measured_gpu_seconds=allocation.gpus * seconds,
                )
            if end is None and until == at:
                moved.append(allocation.pk)
            elif end is not None:
                done.append(allocation.pk)
        OpenAllocation.objects.filter(pk__in=moved).update(counted_until=at)
        OpenAllocation.objects.filter(pk__in=done).delete()
        figures = ("gpu_seconds", "busy_gpu_seconds", "measured_gpu_seconds")
        _upsert(
            UsageRollup,
            ("month", "team", "queue_class", "flavor", "price"),
            figures,
            [
                (
                    *key,
                    *(amounts.get(name, 0.0) for name in figures),
                    busy_source if amounts.get("measured_gpu_seconds") else "",
                )
                for key, amounts in sorted(rows.items())
            ],
            labels=("busy_source",),
        )
    return len(rows)


def count_team_borrowing(pairs: list[tuple[dict[str, Any], dict[str, float]]]) -> None:
    """The borrowing rollup's pairs of one instant (borrower and lender
    ClusterQueues), added up by the queues' teams per month, and each team's
    borrowed and lent totals: a team's own queues lending to each other are
    left out. Upserts adding to what is stored (a month's pairs are many;
    none is read back)."""
    if not pairs:
        return
    names = {keys[side] for keys, _ in pairs for side in ("borrower", "lender")}
    teams = dict(ClusterQueue.objects.filter(name__in=names).values_list("name", "team__slug"))
    rows: dict[tuple[date, str, str, str], float] = defaultdict(float)
    # The team totals beside the pairs: borrowed by the borrower, lent by the lender.
    for keys, amounts in pairs:
        borrower, lender = teams.get(keys["borrower"]) or "", teams.get(keys["lender"]) or ""
        if borrower == lender:
            continue
        month = month_of(keys["hour"])
        rows[(month, borrower, lender, keys["flavor"])] += amounts["gpu_seconds"]
    totals: dict[tuple[date, str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for (month, borrower, lender, flavor), seconds in rows.items():
        totals[(month, borrower, flavor)][0] += seconds
        totals[(month, lender, flavor)][1] += seconds
    _upsert(
        TeamBorrowingRollup,
        ("month", "borrower", "lender", "flavor"),
        ("gpu_seconds",),
        [(*key, seconds) for key, seconds in sorted(rows.items())],
    )
    _upsert(
        TeamBorrowingTotal,
        ("month", "team", "flavor"),
        ("borrowed_gpu_seconds", "lent_gpu_seconds"),
        [(*key, *amounts) for key, amounts in sorted(totals.items())],
    )


def _upsert(
    model: type[Model],
    unique: tuple[str, ...],
    amounts: tuple[str, ...],
    rows: list[tuple[Any, ...]],
    *,
    labels: tuple[str, ...] = (),
) -> None:
    """Insert each row (its ``unique`` fields, its ``amounts``, then its
    ``labels``), or add its amounts to the row already stored (never below
    zero: a correction takes back only what was counted) and set its labels
    where given: one statement per batch, safe beside another writer, nothing
    read back (PostgreSQL, and SQLite from 3.24)."""
    if not rows:
        return
    table = connection.ops.quote_name(model._meta.db_table)
    columns = ", ".join((*unique, *amounts, *labels))
    marks = "(" + ", ".join(["%s"] * (len(unique) + len(amounts) + len(labels))) + ")"
    larger = "GREATEST" if connection.vendor == "postgresql" else "MAX"
    changes = [f"{name} = {larger}(0, {table}.{name} + excluded.{name})" for name in amounts]
    changes += [
        f"{name} = CASE WHEN excluded.{name} = '' THEN {table}.{name} ELSE excluded.{name} END"
        for name in labels
    ]
    with connection.cursor() as cursor:
        for start in range(0, len(rows), UPSERT_BATCH):
            batch = rows[start : start + UPSERT_BATCH]
            cursor.execute(
                f"INSERT INTO {table} ({columns}) VALUES {', '.join([marks] * len(batch))} "
                f"ON CONFLICT ({', '.join(unique)}) DO UPDATE SET {', '.join(changes)}",
                [value for row in batch for value in row],
            )
