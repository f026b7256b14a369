"""Sync: what the cluster did, into Postgres.

Workloads are listed (and, with ``manage.py sync_watch``, watched) and upserted
into ``WorkloadRecord``; each condition transition becomes a ``WorkloadEvent``,
unique per (workload, type, time, reason), so replaying the same list or watch
events writes nothing new. ClusterQueue status and node capacity are
snapshotted periodically. The same code serves both backends.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from cluster.models import (
    TRANSITION_ORDER,
    EventType,
    SyncCursor,
    WorkloadEvent,
    WorkloadRecord,
    WorkloadState,
)
from cluster.rollups import count_admission, count_eviction
from queues.backends.base import TYPES, ClusterBackend, WatchEvent, WatchExpired
from queues.kueue import topology_assignment
from queues.models import LocalQueue, TeamNamespace
from queues.quantity import QuantityError, to_canonical

log = logging.getLogger(__name__)
WORKLOAD = TYPES["Workload"]
GPU = "nvidia.com/gpu"
# Kueue's Preempted message: "Preempted to accommodate a workload (UID: <uid>, JobUID: ...".
PREEMPTOR_UID = re.compile(r"accommodate a workload \(UID: ([^,)\s]+)")


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    parsed = parse_datetime(text)
    if parsed is not None and timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed, UTC)
    return parsed


def amount_of(resource: str, value: Any) -> int:
    try:
        return to_canonical(resource, value)
    except QuantityError:
        return 0


def _requests(workload: Mapping[str, Any]) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """Total requests and per-pod-set shape from the Workload's pod templates."""
    totals: dict[str, int] = {}
    pod_sets = []
    for pod_set in workload.get("spec", {}).get("podSets", []):
        count = int(pod_set.get("count", 1))
        per_pod: dict[str, int] = {}
        for container in pod_set.get("template", {}).get("spec", {}).get("containers", []):
            for resource, value in (container.get("resources", {}).get("requests") or {}).items():
                per_pod[resource] = per_pod.get(resource, 0) + amount_of(resource, value)
        for resource, amount in per_pod.items():
            totals[resource] = totals.get(resource, 0) + amount * count
        spec = pod_set.get("template", {}).get("spec", {})
        shape: dict[str, Any] = {"name": pod_set.get("name", "main"), "count": count}
        shape["requests"] = per_pod
        # Where it may go, so the engine can place it as Kueue would (dry runs, estimates).
        if spec.get("nodeSelector"):
            shape["node_selector"] = dict(spec["nodeSelector"])
        if spec.get("tolerations"):
            shape["tolerations"] = list(spec["tolerations"])
        if pod_set.get("minCount") is not None:
            shape["min_count"] = int(pod_set["minCount"])
        if pod_set.get("topologyRequest"):
            shape["topology_request"] = dict(pod_set["topologyRequest"])
        pod_sets.append(shape)
    return totals, pod_sets


def _conditions(workload: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in workload.get("status", {}).get("conditions", [])}


def state_of(workload: Mapping[str, Any]) -> tuple[str, str, str]:
    """(state, reason, message) from the Workload's conditions."""
    conditions = _conditions(workload)

    def true(kind: str) -> dict[str, Any] | None:
        condition = conditions.get(kind)
        return condition if condition and condition.get("status") == "True" else None

    if finished := true("Finished"):
        failed = finished.get("reason") in ("Failed", "JobFailed") or "fail" in (
            finished.get("message", "").lower()
        )
        return (
            WorkloadState.FAILED if failed else WorkloadState.FINISHED,
            finished.get("reason", ""),
            finished.get("message", ""),
        )
    if workload.get("spec", {}).get("active") is False:
        reason = conditions.get("Evicted", {})
        return (
            WorkloadState.DEACTIVATED,
            reason.get("reason", "Deactivated"),
            reason.get("message", ""),
        )
    evicted = true("Evicted")
    if evicted and workload.get("status", {}).get("admission"):
        return WorkloadState.EVICTED, evicted.get("reason", ""), evicted.get("message", "")
    if admitted := true("Admitted"):
        return WorkloadState.ADMITTED, admitted.get("reason", ""), admitted.get("message", "")
    if reserved := true("QuotaReserved"):
        return (
            WorkloadState.QUOTA_RESERVED,
            reserved.get("reason", ""),
            reserved.get("message", ""),
        )
    pending = conditions.get("QuotaReserved", {})
    return WorkloadState.PENDING, pending.get("reason", ""), pending.get("message", "")


_CONDITION_EVENTS = {
    ("QuotaReserved", "True"): EventType.QUOTA_RESERVED,
    ("Admitted", "True"): EventType.ADMITTED,
    ("Evicted", "True"): EventType.EVICTED,
    ("Preempted", "True"): EventType.PREEMPTED,
    ("Requeued", "True"): EventType.REQUEUED,
}


def events_of(workload: Mapping[str, Any]) -> list[tuple[str, datetime, str, str, dict[str, Any]]]:
    """(type, at, reason, message, details) for every transition visible now."""
    found: list[tuple[str, datetime, str, str, dict[str, Any]]] = []
    created = parse_time(workload.get("metadata", {}).get("creationTimestamp"))
    if created:
        found.append((EventType.CREATED, created, "", "", {}))
    for condition in workload.get("status", {}).get("conditions", []):
        at = parse_time(condition.get("lastTransitionTime"))
        if at is None:
            continue
        key = (condition.get("type"), condition.get("status"))
        if condition.get("type") == "Finished" and condition.get("status") == "True":
            failed = state_of({"status": {"conditions": [condition]}})[0] == WorkloadState.FAILED
            found.append(
                (
                    EventType.FAILED if failed else EventType.FINISHED,
                    at,
                    condition.get("reason", ""),
                    condition.get("message", ""),
                    {},
                )
            )
        elif key in _CONDITION_EVENTS:
            message = condition.get("message", "")
            details = {}
            if key == ("Preempted", "True") and (match := PREEMPTOR_UID.search(message)):
                details["preemptor_uid"] = match.group(1)
            found.append(
                (_CONDITION_EVENTS[key], at, condition.get("reason", ""), message, details)
            )
    for check in workload.get("status", {}).get("admissionChecks", []):
        at = parse_time(check.get("lastTransitionTime"))
        if at is not None:
            found.append(
                (
                    EventType.CHECK_STATE,
                    at,
                    check.get("state", ""),
                    check.get("message", ""),
                    {"check": check.get("name")},
                )
            )
    return found


def _owner(workload: Mapping[str, Any]) -> tuple[str, str]:
    for ref in workload.get("metadata", {}).get("ownerReferences", []):
        return ref.get("kind", ""), ref.get("name", "")
    return "", ""


def _record_admission(shapes: list[dict[str, Any]], assignments: list[Mapping[str, Any]]) -> None:
    """Onto each pod set's shape: the pods admitted when fewer than asked
    (partial admission) and where they run (a topology-aware flavor)."""
    by_name = {a.get("name"): a for a in assignments}
    for shape in shapes:
        assigned = by_name.get(shape["name"])
        if assigned is None:
            continue
        if assigned.get("count") is not None and int(assigned["count"]) != shape["count"]:
            shape["admitted_count"] = int(assigned["count"])
        placed = topology_assignment.pods_per_node(assigned.get("topologyAssignment") or {})
        if placed:
            shape["placed_on"] = placed


def upsert_workload(
    workload: Mapping[str, Any], teams: Mapping[str, int] | None = None
) -> WorkloadRecord:
    """Record one Workload object; idempotent."""
    metadata = workload["metadata"]
    status = workload.get("status", {})
    state, reason, message = state_of(workload)
    totals, pod_sets = _requests(workload)
    assignments = (status.get("admission") or {}).get("podSetAssignments", [])
    flavors = {a["name"]: dict(a.get("flavors", {})) for a in assignments}
    _record_admission(pod_sets, assignments)
    team_ids = teams if teams is not None else _team_ids()
    job_kind, job_name = _owner(workload)
    fields = {
        "namespace": metadata.get("namespace", ""),
        "name": metadata["name"],
        "team_id": team_ids.get(metadata.get("namespace", "")),
        "job_kind": job_kind,
        "job_name": job_name,
        "local_queue": workload.get("spec", {}).get("queueName", ""),
        "cluster_queue": (status.get("admission") or {}).get("clusterQueue", "")
        or metadata.get("labels", {}).get("berth.dev/cluster-queue", ""),
        "priority": int(workload.get("spec", {}).get("priority") or 0),
        "priority_class": (workload.get("spec", {}).get("priorityClassRef") or {}).get(
            "name", workload.get("spec", {}).get("priorityClassName", "")
        ),
        "requested": totals,
        "pod_sets": pod_sets,
        "flavors": flavors,
        "admission_checks": _admission_checks(status),
        "state": state,
        "reason": reason[:64],
        "message": message,
        **_times(metadata, _conditions(workload), state),
        "resource_version": str(metadata.get("resourceVersion", "")),
    }
    with transaction.atomic():
        record = WorkloadRecord.objects.select_for_update().filter(uid=metadata["uid"]).first()
        if record is None:
            try:
                with transaction.atomic():
                    record = WorkloadRecord.objects.create(uid=metadata["uid"], **fields)
            except IntegrityError:  # another sync recorded it a moment ago
                record = WorkloadRecord.objects.select_for_update().get(uid=metadata["uid"])
        elif fields["resource_version"] and (
            (
                record.resource_version == fields["resource_version"]
                and record.state != WorkloadState.DELETED  # a relist's mistake: it is live
            )
            or _older(str(fields["resource_version"]), record.resource_version)
        ):
            # Seen this very version already, or a newer one: a relist's list taken
            # before the watch recorded a change (or the deletion) must not undo it.
            return record
        if not fields["cluster_queue"]:
            # Pending or evicted: no admission names the queue; it stays where it was,
            # or where its LocalQueue points.
            fields["cluster_queue"] = record.cluster_queue or _cluster_queue_of(
                str(fields["namespace"]), str(fields["local_queue"])
            )
        changed = [name for name, value in fields.items() if getattr(record, name) != value]
        for name in changed:
            setattr(record, name, fields[name])
        if changed:
            record.save(update_fields=[*changed, "synced_at"])
        # In time order, so a rollup sees the requeue before the admission after it.
        found = sorted(events_of(workload), key=lambda e: (e[1], TRANSITION_ORDER.get(e[0], 9)))
        for event_type, at, event_reason, event_message, details in found:
            _add_event(record, event_type, at, event_reason, event_message, details)
        evictions = record.events.filter(type=EventType.EVICTED).count()
        if evictions != record.evictions:
            WorkloadRecord.objects.filter(pk=record.pk).update(evictions=evictions)
            record.evictions = evictions
    return record


def _admission_checks(status: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    return {
        str(c.get("name")): {
            "state": c.get("state", ""),
            "lastTransitionTime": c.get("lastTransitionTime", ""),
            "message": c.get("message", ""),
        }
        for c in status.get("admissionChecks") or []
        if c.get("name")
    }


def _times(
    metadata: Mapping[str, Any], conditions: Mapping[str, Any], state: str
) -> dict[str, datetime | None]:
    """When it was created, reserved quota, was admitted and finished, from its
    conditions (a time only where its state says the step happened)."""

    def since(condition: str) -> datetime | None:
        return parse_time(conditions.get(condition, {}).get("lastTransitionTime"))

    reserved = conditions.get("QuotaReserved", {}).get("status") == "True"
    ran = (WorkloadState.ADMITTED, WorkloadState.FINISHED, WorkloadState.FAILED)
    ended = (WorkloadState.FINISHED, WorkloadState.FAILED)
    return {
        "created_at": parse_time(metadata.get("creationTimestamp")) or timezone.now(),
        "reserved_at": since("QuotaReserved") if reserved else None,
        "admitted_at": since("Admitted") if state in ran else None,
        "finished_at": since("Finished") if state in ended else None,
    }


def _add_event(
    record: WorkloadRecord, event_type: str, at: datetime, reason: str, message: str, details: dict
) -> None:
    if WorkloadEvent.objects.filter(
        workload=record, type=event_type, at=at, reason=reason[:64]
    ).exists():
        return
    if uid := details.get("preemptor_uid"):
        preemptor = WorkloadRecord.objects.filter(uid=uid).values("namespace", "name").first()
        if preemptor:
            details = {**details, "preemptor": f"{preemptor['namespace']}/{preemptor['name']}"}
    try:
        with transaction.atomic():
            WorkloadEvent.objects.create(
                workload=record,
                type=event_type,
                at=at,
                reason=reason[:64],
                message=message,
                details=details,
            )
            # Counted only with a new event: a replay or a second sync adds nothing.
            if event_type == EventType.ADMITTED:
                count_admission(record, at)
            elif event_type == EventType.PREEMPTED:
                count_eviction(record, at, reason, preempted=True)
            elif event_type == EventType.EVICTED and reason != "Preempted":
                count_eviction(record, at, reason, preempted=False)
    except IntegrityError:
        pass  # recorded concurrently by another sync


def mark_deleted(
    uid: str, *, seen_at_version: str | None = None, deleted_at_version: str = ""
) -> None:
    """Mark the workload deleted. With ``seen_at_version`` (a relist), only if
    the record still holds that version (compare-and-set): the watch may have
    written a newer one since the list was taken. ``deleted_at_version`` (the
    watch's DELETED event): the deletion's own resourceVersion, kept so that a
    list taken before it, still holding the Workload, cannot bring it back."""
    rows = WorkloadRecord.objects.filter(uid=uid).exclude(state=WorkloadState.DELETED)
    if seen_at_version is not None:
        rows = rows.filter(resource_version=seen_at_version)
    change: dict[str, Any] = {"state": WorkloadState.DELETED, "synced_at": timezone.now()}
    if deleted_at_version:
        change["resource_version"] = deleted_at_version
    if not rows.update(**change):
        return
    record = WorkloadRecord.objects.get(uid=uid)
    _add_event(record, EventType.DELETED, timezone.now().replace(microsecond=0), "", "", {})


def _older(version: str, than: str) -> bool:
    """Whether resourceVersion ``version`` is older than ``than``: both are etcd
    revisions (whole numbers) on Kubernetes; anything else is not compared."""
    return version.isdigit() and than.isdigit() and int(version) < int(than)


def _older_than_list(
    record_version: str, synced_at: datetime, list_version: str, listed_at: datetime
) -> bool:
    """Whether a record was last written before the list was taken, so its
    absence from the list means it is gone. Kubernetes resourceVersions are
    etcd revisions (whole numbers); where one is not, the record's write time
    is compared with when the list began."""
    if record_version.isdigit() and list_version.isdigit():
        return int(record_version) <= int(list_version)
    return synced_at < listed_at


def _cluster_queue_of(namespace: str, local_queue: str) -> str:
    name = (
        LocalQueue.objects.filter(namespace__name=namespace, name=local_queue)
        .values_list("cluster_queue__name", flat=True)
        .first()
    )
    return name or ""


def _team_ids() -> dict[str, int]:
    return dict(TeamNamespace.objects.values_list("name", "team_id"))


def _recorded_versions(uids: list[str]) -> dict[str, str]:
    """The resourceVersion each live record holds, for the listed ``uids``: a
    Workload listed at the version its record holds has not changed since it
    was recorded, and costs the relist nothing (no row lock, no events read)."""
    found: dict[str, str] = {}
    for start in range(0, len(uids), 2000):
        found.update(
            WorkloadRecord.objects.filter(uid__in=uids[start : start + 2000])
            .exclude(state=WorkloadState.DELETED)
            .values_list("uid", "resource_version")
        )
    return found


def sync_workloads(backend: ClusterBackend) -> str:
    """Relist every Workload: upsert what changed since it was recorded (its
    resourceVersion), mark what vanished as deleted — never one the watch
    wrote after the list was taken. Returns the list's resourceVersion (where
    a watch resumes)."""
    listed_at = timezone.now()
    items, version = backend.list(WORKLOAD)
    teams = _team_ids()
    seen = set()
    known = _recorded_versions([item["metadata"]["uid"] for item in items])
    for item in items:
        uid = item["metadata"]["uid"]
        seen.add(uid)
        listed = str(item["metadata"].get("resourceVersion", ""))
        if listed and known.get(uid) == listed:
            continue  # recorded at this very version (by the watch, or the last relist)
        upsert_workload(item, teams)
    # Missing from the list is gone only if last seen before the list: the
    # watch, running beside this, records workloads created since.
    missing = (
        WorkloadRecord.objects.exclude(state=WorkloadState.DELETED)
        .exclude(uid__in=seen)
        .values_list("uid", "resource_version", "synced_at")
    )
    for uid, record_version, synced_at in missing:
        if _older_than_list(record_version, synced_at, version, listed_at):
            mark_deleted(uid, seen_at_version=record_version)
    SyncCursor.objects.update_or_create(
        kind="Workload", defaults={"resource_version": version, "listed_at": timezone.now()}
    )
    return version


def apply_watch_event(event: WatchEvent, teams: Mapping[str, int] | None = None) -> None:
    if event.type == "BOOKMARK":
        pass
    elif event.type == "DELETED":
        metadata = event.object["metadata"]
        mark_deleted(metadata["uid"], deleted_at_version=str(metadata.get("resourceVersion") or ""))
    else:
        upsert_workload(event.object, teams)
    if event.resource_version:
        SyncCursor.objects.update_or_create(
            kind="Workload", defaults={"resource_version": event.resource_version}
        )


# What the apps above follow on a Workload's change (jobs: their request's
# state), called by the watch so a job's state follows within a second or so,
# not at the next periodic sync. Each gets the (namespace, kind, name) of the
# jobs whose Workloads changed.
JobKey = tuple[str, str, str]
WatchFollower = Callable[[ClusterBackend, set[JobKey]], object]
_watch_followers: list[WatchFollower] = []
FOLLOW_EVERY = 0.5  # seconds: a burst of events is followed in batches


def register_watch_follower(follower: WatchFollower) -> None:
    if follower not in _watch_followers:
        _watch_followers.append(follower)


def _follow(backend: ClusterBackend, changed: set[JobKey]) -> None:
    for follower in _watch_followers:
        try:
            follower(backend, changed)
        except Exception:  # the periodic sync catches up; the watch goes on
            log.exception("following %d changed workload(s) failed", len(changed))


class _Following:
    """The jobs of the Workloads the watch saw change, followed in batches at
    most every ``FOLLOW_EVERY`` seconds: a change after a quiet spell at once,
    in the watch's own thread; one within ``FOLLOW_EVERY`` of the last follow
    by a thread of its own when that time is up — the watch's stream blocks
    until the next event, which may be minutes away, and the last change of a
    burst must not wait for it. What is left when the watch round ends is
    followed before it returns, in the watch's thread."""

    def __init__(self, backend: ClusterBackend) -> None:
        self.backend = backend
        self.lock = threading.Lock()
        self.pending: set[JobKey] = set()
        self.last = 0.0
        self.wake = threading.Event()
        self.closing = False
        self.thread: threading.Thread | None = None

    def add(self, changed: set[JobKey]) -> None:
        if not changed or not _watch_followers:
            return
        with self.lock:
            due = not self.pending and time.monotonic() - self.last >= FOLLOW_EVERY
            if due:
                self.last = time.monotonic()
            else:
                self.pending |= changed
                self.wake.set()
                if self.thread is None:
                    self.thread = threading.Thread(
                        target=self._later, name="watch-follower", daemon=True
                    )
                    self.thread.start()
        if due:
            _follow(self.backend, changed)

    def _later(self) -> None:
        try:
            while True:
                self.wake.wait()
                with self.lock:
                    wait = self.last + FOLLOW_EVERY - time.monotonic()
                if wait > 0 and not self.closing:
                    time.sleep(min(wait, FOLLOW_EVERY))
                    continue
                with self.lock:
                    if self.closing:
                        return  # the watch's thread follows what is left
                    batch, self.pending = self.pending, set()
                    self.wake.clear()
                    self.last = time.monotonic()
                if batch:
                    _follow(self.backend, batch)
        finally:
            connection.close()

    def close(self) -> None:
        """Stop the thread and follow what is still pending, here."""
        with self.lock:
            self.closing = True
            self.wake.set()
        if self.thread is not None:
            self.thread.join()
        with self.lock:
            batch, self.pending = self.pending, set()
            self.closing, self.thread = False, None
            self.wake.clear()
            self.last = time.monotonic()
        if batch:
            _follow(self.backend, batch)


def watch_workloads(
    backend: ClusterBackend, *, timeout_seconds: int = 60, rounds: int | None = None
) -> int:
    """Follow Workloads: resume from the stored resourceVersion, relist on 410
    Gone (the client raises it after one resume). ``rounds`` bounds the loop
    (tests); None runs forever. Returns how many events were applied. The jobs
    of changed Workloads are followed as the watch sees them (``_Following``)."""
    applied = 0
    done = 0
    cursor = SyncCursor.objects.filter(kind="Workload").first()
    version = cursor.resource_version if cursor and cursor.resource_version else ""
    if not version:
        version = sync_workloads(backend)
    following = _Following(backend)
    try:
        while rounds is None or done < rounds:
            done += 1
            try:
                teams = _team_ids()
                for event in backend.watch(WORKLOAD, version, timeout_seconds=timeout_seconds):
                    apply_watch_event(event, teams)
                    applied += event.type != "BOOKMARK"
                    version = event.resource_version or version
                    following.add(_job_keys(event))
            except WatchExpired:
                log.info("workload watch expired at %s; relisting", version)
                version = sync_workloads(backend)
    finally:
        following.close()
    return applied


def _job_keys(event: WatchEvent) -> set[JobKey]:
    """The job (namespace, kind, name) a Workload event is about, if any."""
    if event.type == "BOOKMARK":
        return set()
    kind, name = _owner(event.object)  # as the record stores it, which follow_jobs matches
    if not name:
        return set()
    return {(event.object.get("metadata", {}).get("namespace", ""), kind, name)}
