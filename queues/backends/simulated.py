"""The simulated backend: Berth's embedded cluster, stored in Berth's database.

It answers the same calls as a Kubernetes API server (list, get, apply, delete,
watch, status) for the kinds Berth uses, with resourceVersions from a change
log, so reconcile and sync cannot tell it from a real cluster. What Kueue and
the job controllers would do on a real cluster is done by
``queues.simulation`` at each step.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from django.db import transaction
from django.db.models import Max, Min
from django.utils import timezone

from queues.backends.base import (
    FIELD_MANAGER,
    TYPES,
    BackendError,
    ResourceType,
    WatchEvent,
    WatchExpired,
)
from queues.kueue.render import KUEUE_VERSION
from queues.models import SimulatedEvent, SimulatedObject

# Change-log entries kept for watches; older resourceVersions get 410 Gone.
RETAINED_EVENTS = 50_000


def _locked(kind: str, namespace: str | None, name: str) -> SimulatedObject | None:
    """The stored object, locked until the transaction ends; None when absent."""
    return (
        SimulatedObject.objects.select_for_update()
        .filter(kind=kind, namespace=namespace or "", name=name)
        .first()
    )


def _strip_server_fields(body: dict[str, Any]) -> dict[str, Any]:
    metadata = {
        k: v
        for k, v in body.get("metadata", {}).items()
        if k not in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields")
    }
    return {**body, "metadata": metadata}


def _identity(metadata: Mapping[str, Any]) -> dict[str, Any]:
    return {k: metadata[k] for k in ("name", "namespace") if k in metadata}


def _applied_keys(body: Mapping[str, Any]) -> dict[str, set[str]]:
    """The label and annotation keys Berth's last apply set (its managedFields)."""
    keys: dict[str, set[str]] = {"labels": set(), "annotations": set()}
    for entry in body.get("metadata", {}).get("managedFields") or []:
        if entry.get("manager") != FIELD_MANAGER or entry.get("operation") != "Apply":
            continue
        fields = entry.get("fieldsV1", {}).get("f:metadata", {})
        for part in keys:
            keys[part] |= {key[2:] for key in fields.get(f"f:{part}", {})}
    return keys


def _managed_fields(obj: Mapping[str, Any], metadata: Mapping[str, Any]) -> list[dict[str, Any]]:
    fields: dict[str, Any] = {}
    for part in ("labels", "annotations"):
        if metadata.get(part):
            fields[f"f:{part}"] = {f"f:{key}": {} for key in sorted(metadata[part])}
    return [
        {
            "manager": FIELD_MANAGER,
            "operation": "Apply",
            "apiVersion": obj["apiVersion"],
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": fields},
        }
    ]


class SimulatedBackend:
    name = "simulated"
    # The embedded Kueue reads its configuration from the ConfigMap Berth writes.
    writes_kueue_manager_config = True

    def kueue_versions(self) -> list[str]:
        return [KUEUE_VERSION, "v1beta1"]

    # ------------------------------------------------------------------ read

    def list(
        self, rtype: ResourceType, *, label_selector: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        wanted = _selector(label_selector)
        rows = SimulatedObject.objects.filter(kind=rtype.kind).order_by("namespace", "name")
        items = [row.body for row in rows if _matches(row.body, wanted)]
        version = SimulatedEvent.objects.aggregate(v=Max("id"))["v"] or 0
        return items, str(version)

    def get(
        self, rtype: ResourceType, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        row = SimulatedObject.objects.filter(
            kind=rtype.kind, namespace=namespace or "", name=name
        ).first()
        return row.body if row else None

    # ----------------------------------------------------------------- write

    def _record(self, kind: str, event_type: str, body: dict[str, Any]) -> int:
        event = SimulatedEvent.objects.create(kind=kind, event_type=event_type, body=body)
        return int(event.pk)

    def _store(
        self, row: SimulatedObject | None, body: dict[str, Any], *, created: bool
    ) -> dict[str, Any]:
        """Give ``body`` its server fields and a new resourceVersion, and log it."""
        kind = body["kind"]
        metadata = body.setdefault("metadata", {})
        if row is None:
            metadata["uid"] = str(uuid.uuid4())
            metadata["creationTimestamp"] = timezone.now().strftime("%Y-%m-%dT%H:%M:%SZ")
            metadata["generation"] = 1
        event_id = self._record(kind, "ADDED" if created else "MODIFIED", body)
        metadata["resourceVersion"] = str(event_id)
        if row is None:
            row = SimulatedObject(
                api_version=body["apiVersion"],
                kind=kind,
                namespace=metadata.get("namespace", ""),
                name=metadata["name"],
                uid=metadata["uid"],
            )
        row.resource_version = event_id
        row.body = body
        row.save()
        SimulatedEvent.objects.filter(pk=event_id).update(body=body)
        return body

    def apply(
        self, obj: Mapping[str, Any], *, force: bool, dry_run: bool = False
    ) -> dict[str, Any]:
        """Create, or replace what Berth sets (spec, value, a ConfigMap's data,
        its labels and annotations), keeping the status and other managers' labels. Unforced,
        a label another manager set to a different value is a 409 conflict."""
        body = _strip_server_fields(dict(obj))
        metadata = body["metadata"]
        if obj["kind"] not in TYPES:
            raise BackendError(f"the simulated cluster does not serve {obj['kind']}", status=404)
        with transaction.atomic():
            row = _locked(obj["kind"], metadata.get("namespace"), metadata["name"])
            expected = obj["metadata"].get("resourceVersion")
            if row is not None and expected and str(row.resource_version) != str(expected):
                raise BackendError(
                    f"apply {obj['kind']} {metadata['name']}: Operation cannot be fulfilled: "
                    "the object has been modified; please apply your changes to the latest "
                    "version and try again",
                    status=409,
                    reason="Conflict",
                    transient=True,
                )
            owned = _applied_keys(row.body) if row else {"labels": set(), "annotations": set()}
            existing = row.body if row else {"metadata": {}}
            merged = dict(existing) if row else dict(body)
            merged_metadata = {**existing["metadata"], **_identity(metadata)}
            for part in ("labels", "annotations"):
                current = dict(existing["metadata"].get(part) or {})
                applied = dict(metadata.get(part) or {})
                foreign = {
                    key
                    for key, value in applied.items()
                    if key in current and current[key] != value and key not in owned[part]
                }
                if foreign and not force:
                    raise BackendError(
                        f"apply {obj['kind']} {metadata['name']}: Apply failed with "
                        f"{len(foreign)} conflict(s): {part} {', '.join(sorted(foreign))} "
                        "owned by another manager",
                        status=409,
                        reason="Conflict",
                    )
                # Like server-side apply: what Berth applied before and no longer
                # applies goes; what other managers set stays.
                kept = {k: v for k, v in current.items() if k not in owned[part]}
                merged_metadata[part] = {**kept, **applied}
                if not merged_metadata[part]:
                    merged_metadata.pop(part)
            merged_metadata["managedFields"] = _managed_fields(obj, metadata)
            merged["metadata"] = merged_metadata
            if row is not None:
                for key in ("spec", "value", "data"):
                    if key in body:
                        if key == "spec" and merged.get("spec") != body["spec"]:
                            merged["metadata"]["generation"] = (
                                int(merged["metadata"].get("generation", 1)) + 1
                            )
                        merged[key] = body[key]
                    elif force:
                        merged.pop(key, None)
            if dry_run:
                return merged
            return self._store(row, merged, created=row is None)

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """POST: 409 if it exists (jobs are created, not applied)."""
        body = _strip_server_fields(dict(obj))
        metadata = body["metadata"]
        with transaction.atomic():
            exists = SimulatedObject.objects.filter(
                kind=obj["kind"], namespace=metadata.get("namespace", ""), name=metadata["name"]
            ).exists()
            if exists:
                raise BackendError(
                    f"{obj['kind']} {metadata['name']} already exists",
                    status=409,
                    reason="AlreadyExists",
                )
            return self._store(None, body, created=True)

    def replace(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Write a whole object (the simulated controllers' own updates)."""
        metadata = obj["metadata"]
        with transaction.atomic():
            row = _locked(obj["kind"], metadata.get("namespace"), metadata["name"])
            if row is None:
                raise BackendError(f"{obj['kind']} {metadata['name']} not found", status=404)
            return self._store(row, dict(obj), created=False)

    def delete(self, rtype: ResourceType, name: str, namespace: str | None = None) -> None:
        """Delete an object and then, as the garbage collector does after a
        delete with ``propagationPolicy=Background`` (what the kubernetes
        backend sends), its dependents: a Workload goes with the job that owns
        it, so its quota or its place in line is free at once."""
        with transaction.atomic():
            row = _locked(rtype.kind, namespace, name)
            if row is None:
                return
            self._remove(row)
            self._collect({(row.namespace, row.uid)})

    def _remove(self, row: SimulatedObject) -> None:
        body = row.body
        row.delete()
        event_id = self._record(row.kind, "DELETED", body)
        body["metadata"]["resourceVersion"] = str(event_id)
        SimulatedEvent.objects.filter(pk=event_id).update(body=body)

    def collect_garbage(self) -> int:
        """One pass of the garbage collector over the whole cluster: objects
        whose owners are all gone are deleted (with their own dependents). It
        catches what a delete left behind before it cascaded (a database
        written by an older Berth), so such a Workload cannot hold quota or a
        queue's head across restarts. Returns how many objects it deleted."""
        with transaction.atomic():
            return self._collect(None)

    def _collect(self, owners: set[tuple[str, str]] | None) -> int:
        """Delete the dependents of ``owners`` ((namespace, uid) of deleted
        objects; None: of every absent owner) as Kubernetes' garbage collector
        does: an object goes when none of its owners exists any more (matched
        by uid), and then its dependents in turn; one that still has an owner
        keeps it and loses only the references to the absent ones."""
        deleted = 0
        while owners is None or owners:
            rows = SimulatedObject.objects.select_for_update().filter(
                body__metadata__has_key="ownerReferences"
            )
            if owners is not None and all(namespace for namespace, _ in owners):
                # A namespaced owner's dependents live in its namespace.
                rows = rows.filter(namespace__in={namespace for namespace, _ in owners})
            wanted = {uid for _, uid in owners} if owners is not None else None
            candidates = []
            for row in rows.order_by("id"):
                refs = list(row.body["metadata"].get("ownerReferences") or [])
                if refs and (wanted is None or any(r.get("uid") in wanted for r in refs)):
                    candidates.append((row, refs))
            named = {str(r.get("uid")) for _, refs in candidates for r in refs}
            present = set(
                SimulatedObject.objects.filter(uid__in=named).values_list("uid", flat=True)
            )
            gone: set[tuple[str, str]] = set()
            for row, refs in candidates:
                solid = [r for r in refs if r.get("uid") in present]
                if len(solid) == len(refs):
                    continue
                if solid:
                    body = dict(row.body)
                    body["metadata"] = {**body["metadata"], "ownerReferences": solid}
                    self._store(row, body, created=False)
                else:
                    self._remove(row)
                    gone.add((row.namespace, row.uid))
                    deleted += 1
            owners = gone
        return deleted

    def patch_status(
        self,
        rtype: ResourceType,
        name: str,
        namespace: str | None,
        status: Mapping[str, Any],
        *,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        with transaction.atomic():
            row = _locked(rtype.kind, namespace, name)
            if row is None:
                raise BackendError(f"{rtype.kind} {name} not found", status=404)
            if resource_version and str(row.resource_version) != str(resource_version):
                raise BackendError(
                    f"patch status of {rtype.kind} {name}: Operation cannot be fulfilled: "
                    "the object has been modified; please apply your changes to the latest "
                    "version and try again",
                    status=409,
                    reason="Conflict",
                    transient=True,
                )
            body = dict(row.body)
            body["status"] = merge_status(body.get("status") or {}, status)
            return self._store(row, body, created=False)

    # ----------------------------------------------------------------- watch

    def watch(
        self, rtype: ResourceType, resource_version: str, *, timeout_seconds: int
    ) -> Iterator[WatchEvent]:
        """Replay the change log after ``resource_version``, then poll it until
        the timeout, with a bookmark when nothing happened."""
        since = int(resource_version or 0)
        oldest = SimulatedEvent.objects.aggregate(v=Min("id"))["v"]
        if oldest is not None and since < oldest - 1:
            raise WatchExpired(
                f"watch {rtype.plural}: resourceVersion {since} is too old",
                status=410,
                reason="Expired",
            )
        deadline = time.monotonic() + timeout_seconds
        while True:
            events = list(SimulatedEvent.objects.filter(id__gt=since).order_by("id")[:1000])
            for event in events:
                since = int(event.pk)
                if event.kind == rtype.kind:
                    yield WatchEvent(event.event_type, event.body)
            if not events:
                yield WatchEvent(
                    "BOOKMARK",
                    {
                        "kind": rtype.kind,
                        "apiVersion": rtype.api_version,
                        "metadata": {"resourceVersion": str(since)},
                    },
                )
            if time.monotonic() >= deadline:
                return
            if not events:
                time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))

    def prune_log(self, keep: int = RETAINED_EVENTS) -> int:
        newest = SimulatedEvent.objects.aggregate(v=Max("id"))["v"] or 0
        deleted, _ = SimulatedEvent.objects.filter(id__lte=newest - keep).delete()
        return deleted


# Status lists the API server merges by key under server-side apply
# (x-kubernetes-list-type: map in the CRDs); other lists are replaced whole.
LIST_MAP_KEYS = {"admissionChecks": "name", "conditions": "type"}


def merge_status(current: Mapping[str, Any], applied: Mapping[str, Any]) -> dict[str, Any]:
    """``applied`` over ``current`` as a status apply would: top-level fields
    replaced, list-map entries merged by their key (others' entries kept)."""
    merged = dict(current)
    for name, value in applied.items():
        key = LIST_MAP_KEYS.get(name)
        if key is None or not isinstance(value, list):
            merged[name] = value
            continue
        entries = {e.get(key): e for e in current.get(name) or [] if isinstance(e, dict)}
        order = list(entries)
        for entry in value:
            if entry.get(key) not in entries:
                order.append(entry.get(key))
            entries[entry.get(key)] = dict(entry)
        merged[name] = [entries[k] for k in order]
    return merged


def _selector(text: str | None) -> list[tuple[str, str, str | None]]:
    """Equality selectors: ``k=v``, ``k!=v``, ``k`` (exists), ``!k``."""
    terms: list[tuple[str, str, str | None]] = []
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        if "!=" in part:
            key, value = part.split("!=", 1)
            terms.append(("!=", key.strip(), value.strip()))
        elif "=" in part:
            key, value = part.split("=", 1)
            terms.append(("=", key.strip(), value.strip().lstrip("=")))
        elif part.startswith("!"):
            terms.append(("!", part[1:], None))
        else:
            terms.append(("exists", part, None))
    return terms


def _matches(obj: Mapping[str, Any], terms: list[tuple[str, str, str | None]]) -> bool:
    labels = obj.get("metadata", {}).get("labels", {})
    for op, key, value in terms:
        if op == "=" and labels.get(key) != value:
            return False
        if op == "!=" and labels.get(key) == value:
            return False
        if op == "exists" and key not in labels:
            return False
        if op == "!" and key in labels:
            return False
    return True
