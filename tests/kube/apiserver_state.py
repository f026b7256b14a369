"""The object store behind :class:`tests.kube.apiserver.FakeApiServer`.

One global resourceVersion counter, a bounded event history for watches, and the verbs
(create, update, replace, patch, apply, delete, paged list) with their admission checks.
Everything that touches the store runs under ``Store.lock``. The vocabulary it shares with
the HTTP layer lives in ``apiserver_resources.py``, selectors in ``apiserver_selectors.py``,
the patch formats in ``apiserver_patches.py``, field ownership/server-side apply in
``apiserver_ownership.py`` and status list-maps/validation in ``apiserver_listmaps.py``; this
module keeps only what needs the stored objects.
"""

from __future__ import annotations

import base64
import copy
import random
import re
import string
import threading
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tests.kube.apiserver_listmaps import check_status
from tests.kube.apiserver_ownership import (
    Identity,
    apply_configuration,
    field_paths,
    record_update,
    write_ownership,
)
from tests.kube.apiserver_patches import json_patch, merge_patch
from tests.kube.apiserver_resources import (
    APPLY,
    INITIAL_STATUS,
    JSON_PATCH,
    MERGE,
    STRATEGIC,
    ApiError,
    Key,
    Obj,
    ResourceType,
    now,
    status_body,
)
from tests.kube.apiserver_selectors import Matcher

__all__ = ["Event", "Store", "status_body"]  # status_body: imported from here by older tests

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SERVER_META = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")


@dataclass(frozen=True)
class Event:
    rv: int
    type: str
    rtype: ResourceType
    obj: Obj
    prev: Obj | None  # the state before, so selector watches can turn MODIFIED into ADDED/DELETED


def _without_times(obj: Obj) -> Obj:
    clone = copy.deepcopy(obj)
    for entry in (clone.get("metadata") or {}).get("managedFields") or []:
        entry.pop("time", None)
    return clone


def _content(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


class Store:
    def __init__(self, resources: Sequence[ResourceType], history_limit: int = 1000) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.types = {(r.group, r.plural): r for r in resources}
        self.objects: dict[Key, Obj] = {}
        self.rv = 0
        self.history: deque[Event] = deque()
        self.history_limit = history_limit
        self.compacted = 0  # watches from a resourceVersion below this get 410 Gone
        self.epoch = 0  # bumped by expire(): open watches end with 410 Gone
        self.following = 0  # watches past their replay, waiting for live changes

    def wait_following(self, count: int, timeout: float) -> bool:
        """Whether ``count`` watches follow live changes within ``timeout`` seconds."""
        with self.changed:
            return self.changed.wait_for(lambda: self.following >= count, timeout)

    @staticmethod
    def key(rtype: ResourceType, namespace: str | None, name: str) -> Key:
        return (rtype.group, rtype.plural, namespace or "", name)

    def type_of(self, obj: Obj) -> ResourceType:
        group = obj.get("apiVersion", "").rpartition("/")[0]
        for rtype in self.types.values():
            if rtype.group == group and rtype.kind == obj.get("kind"):
                return rtype
        raise KeyError(f"no served resource for {obj.get('apiVersion')} {obj.get('kind')}")

    def commit(self, rtype: ResourceType, obj: Obj, event_type: str) -> Obj:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        meta = obj["metadata"]
        key = self.key(rtype, meta.get("namespace"), meta["name"])
        prev = self.objects.pop(key, None)
        if event_type != "DELETED":
            self.objects[key] = obj
        self.history.append(Event(self.rv, event_type, rtype, copy.deepcopy(obj), prev))
        while len(self.history) > self.history_limit:
            self.compacted = self.history.popleft().rv
        self.changed.notify_all()
        if event_type == "DELETED" and rtype.plural == "namespaces" and not rtype.group:
            for key in [k for k in self.objects if k[2] == meta["name"]]:
                gone = self.objects[key]
                self.commit(self.types[key[0], key[1]], gone, "DELETED")  # namespace cleanup
        return copy.deepcopy(obj)

    def expire(self) -> None:
        self.compacted, self.epoch = self.rv, self.epoch + 1
        self.changed.notify_all()

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self.objects.get(self.key(rtype, namespace, name))
        if obj is None:
            raise rtype.not_found(name)
        return copy.deepcopy(obj)

    def select(self, rtype: ResourceType, namespace: str | None, match: Matcher) -> list[Obj]:
        found = [
            obj
            for (group, plural, ns, _), obj in sorted(self.objects.items())
            if (group, plural) == (rtype.group, rtype.plural) and namespace in (None, ns)
        ]
        return [copy.deepcopy(obj) for obj in found if match(obj)]

    def _check_body(self, rtype: ResourceType, body: Any, version: str, *, strict: bool) -> Obj:
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        obj = copy.deepcopy(body)
        if strict and not obj.get("kind"):
            raise ApiError(400, "Object 'Kind' is missing in the request body")
        if strict and not obj.get("apiVersion"):
            raise ApiError(400, "Object 'apiVersion' is missing in the request body")
        if obj.get("kind", rtype.kind) != rtype.kind:
            raise ApiError(400, f"the kind in the data ({obj['kind']}) does not match {rtype.kind}")
        expected = rtype.api_version(version)
        if obj.get("apiVersion", expected) != expected:
            raise ApiError(
                400,
                f"the API version in the data ({obj['apiVersion']}) does not match the "
                f"expected API version ({expected})",
            )
        if not isinstance(obj.setdefault("metadata", {}), dict):
            raise ApiError(400, "metadata must be an object")
        obj["apiVersion"], obj["kind"] = expected, rtype.kind
        return obj

    def _check_target(self, rtype: ResourceType, obj: Obj, namespace: str | None) -> None:
        meta = obj["metadata"]
        if rtype.namespaced:
            if meta.get("namespace", namespace) != namespace:
                raise ApiError(
                    400,
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request",
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)

    def create(
        self,
        rtype: ResourceType,
        namespace: str | None,
        body: Any,
        version: str,
        *,
        ident: Identity,
        dry_run: bool = False,
        check_namespace: bool = True,
    ) -> Obj:
        apply = ident[1] == "Apply"
        obj = self._check_body(rtype, body, version, strict=rtype.custom or apply)
        self._check_target(rtype, obj, namespace)
        meta = obj["metadata"]
        if meta.get("resourceVersion"):
            raise ApiError(500, "resourceVersion should not be set on objects to be created")
        if not meta.get("name") and meta.get("generateName"):
            suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
            meta["name"] = meta["generateName"] + suffix
        name = meta.get("name")
        pattern, limit = (_DNS_LABEL, 63) if rtype.plural == "namespaces" else (_DNS_SUBDOMAIN, 253)
        if not name or not pattern.match(name) or len(name) > limit:
            message = f'{rtype.kind} "{name or ""}" is invalid: metadata.name: Invalid value'
            raise ApiError(422, message, "Invalid", {"name": name or "", "kind": rtype.kind})
        if check_namespace and rtype.namespaced:
            namespaces = self.types["", "namespaces"]
            if self.key(namespaces, None, namespace or "") not in self.objects:
                raise namespaces.not_found(namespace or "")
        if self.key(rtype, namespace, name) in self.objects:
            details = {"name": name, "group": rtype.group, "kind": rtype.plural}
            message = f'{rtype.qualified} "{name}" already exists'
            raise ApiError(409, message, "AlreadyExists", details)
        for field in (*_SERVER_META, "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(field, None)
        meta |= {"uid": str(uuid.uuid4()), "creationTimestamp": now(), "generation": 1}
        obj["apiVersion"] = rtype.api_version()  # stored in the preferred version
        if rtype.status_subresource:
            obj.pop("status", None)
        if rtype.kind in INITIAL_STATUS and rtype.group == "":
            obj["status"] = copy.deepcopy(INITIAL_STATUS[rtype.kind])
        if apply:
            write_ownership(obj, {ident: set(field_paths(obj, ident[2]))}, None)
        else:
            record_update(None, obj, ident)
        return copy.deepcopy(obj) if dry_run else self.commit(rtype, obj, "ADDED")

    def update(
        self,
        rtype: ResourceType,
        old: Obj,
        new: Obj,
        *,
        subresource: str,
        ident: Identity | None,
        dry_run: bool = False,
    ) -> Obj:
        """Store ``new`` over ``old``: immutable metadata, status isolation, generation,
        ownership, no-op detection, status validation and finalizer-driven removal."""
        rv = (new.get("metadata") or {}).get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise ApiError(
                409,
                f'Operation cannot be fulfilled on {rtype.qualified} "{old["metadata"]["name"]}": '
                "the object has been modified; please apply your changes to the latest version "
                "and try again",
                "Conflict",
                {"name": old["metadata"]["name"], "group": rtype.group, "kind": rtype.plural},
            )
        if subresource == "status":
            result = copy.deepcopy(old)
            result.pop("status", None)
            if new.get("status") is not None:
                result["status"] = copy.deepcopy(new["status"])
        else:
            result = copy.deepcopy(new)
            if rtype.status_subresource:
                result.pop("status", None)
                if "status" in old:
                    result["status"] = copy.deepcopy(old["status"])
            meta = result.setdefault("metadata", {})
            immutable = ("name", "namespace", "deletionTimestamp", "deletionGracePeriodSeconds")
            for field in (*_SERVER_META, *immutable):
                meta.pop(field, None)
                if field in old["metadata"]:
                    meta[field] = copy.deepcopy(old["metadata"][field])
        if ident is not None and ident[1] == "Apply":  # apply_configuration computed ownership
            result["metadata"].pop("managedFields", None)
            if (new.get("metadata") or {}).get("managedFields"):
                result["metadata"]["managedFields"] = new["metadata"]["managedFields"]
        result["apiVersion"], result["kind"] = rtype.api_version(), rtype.kind
        if _content(result) != _content(old):
            result["metadata"]["generation"] = old["metadata"].get("generation", 0) + 1
        if ident is not None and ident[1] == "Update":
            record_update(old, result, ident)
        if _without_times(result) == _without_times(old):
            return copy.deepcopy(old)  # a no-op write stores nothing and bumps nothing
        if subresource == "status":
            check_status(result)  # the CRD rules the double knows (maxItems, enums, ...)
        if dry_run:
            return result
        deleting = result["metadata"].get("deletionTimestamp")
        if deleting and not result["metadata"].get("finalizers"):
            return self.commit(rtype, result, "DELETED")
        return self.commit(rtype, result, "MODIFIED")

    def delete(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        *,
        options: Obj,
        dry_run: bool = False,
    ) -> tuple[Obj, bool]:
        """Delete now, or mark for deletion while finalizers remain. Returns (object, gone)."""
        old = self.get(rtype, namespace, name)
        preconditions = options.get("preconditions") or {}
        for field in ("uid", "resourceVersion"):
            if preconditions.get(field) and preconditions[field] != old["metadata"].get(field):
                message = (
                    f"Precondition failed: {field.title()} in precondition: "
                    f"{preconditions[field]}, {field.title()} in object meta: "
                    f"{old['metadata'].get(field)}"
                )
                raise ApiError(409, message, "Conflict")
        if old["metadata"].get("finalizers"):
            if old["metadata"].get("deletionTimestamp") or dry_run:
                return old, False
            marked = copy.deepcopy(old)
            marked["metadata"] |= {"deletionTimestamp": now(), "deletionGracePeriodSeconds": 0}
            return self.commit(rtype, marked, "MODIFIED"), False
        return (old if dry_run else self.commit(rtype, old, "DELETED")), True

    # --- verbs beyond create/update/delete, called by the HTTP layer with the lock held ---------

    def replace(
        self,
        rtype: ResourceType,
        version: str,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        subresource: str,
        ident: Identity,
        dry_run: bool,
    ) -> Obj:
        old = self.get(rtype, namespace, name)
        new = self._check_body(rtype, body, version, strict=rtype.custom)
        _check_name(new, name)
        if rtype.custom and not new["metadata"].get("resourceVersion"):
            message = (
                f'{rtype.kind}.{rtype.group} "{name}" is invalid: metadata.resourceVersion: '
                "Invalid value: 0x0: must be specified for an update"
            )
            raise ApiError(422, message, "Invalid")
        return self.update(rtype, old, new, subresource=subresource, ident=ident, dry_run=dry_run)

    def patch(
        self,
        rtype: ResourceType,
        version: str,
        namespace: str | None,
        name: str,
        body: Any,
        media: str,
        *,
        subresource: str,
        ident: Identity,
        dry_run: bool,
    ) -> Obj:
        """Merge, strategic-merge (built-in types only; treated as merge) or JSON patch."""
        if media == STRATEGIC and rtype.custom:
            accepted = f"{JSON_PATCH}, {MERGE}, {APPLY}"
            message = "the body of the request was in an unknown format - accepted media types"
            raise ApiError(415, f"{message} include: {accepted}")
        old = self.get(rtype, namespace, name)
        current = old | {"apiVersion": rtype.api_version(version)}
        if media in (MERGE, STRATEGIC):
            if not isinstance(body, dict):
                raise ApiError(400, "the merge patch must be a JSON object")
            patched = merge_patch(current, body)
        elif media == JSON_PATCH:
            patched = json_patch(current, body)
        else:
            raise ApiError(415, f"the body of the request was in an unknown format: {media!r}")
        new = self._check_body(rtype, patched, version, strict=False)
        _check_name(new, name)
        return self.update(rtype, old, new, subresource=subresource, ident=ident, dry_run=dry_run)

    def apply(
        self,
        rtype: ResourceType,
        version: str,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        subresource: str,
        manager: str | None,
        force: bool,
        dry_run: bool,
    ) -> tuple[int, Obj]:
        """Server-side apply: create if missing (201), else merge with ownership checks."""
        if not manager:
            raise ApiError(400, "PATCH: fieldManager is required for apply requests")
        applied = self._check_body(rtype, body, version, strict=True)
        _check_name(applied, name)
        self._check_target(rtype, applied, namespace)
        ident = (manager, "Apply", subresource)
        if self.key(rtype, namespace, name) not in self.objects:
            if subresource:
                raise rtype.not_found(name)
            created = self.create(rtype, namespace, applied, version, ident=ident, dry_run=dry_run)
            return 201, created
        old = self.get(rtype, namespace, name)
        result = apply_configuration(old, applied, ident, force=force)
        result["metadata"]["resourceVersion"] = applied["metadata"].get("resourceVersion")
        return 200, self.update(
            rtype, old, result, subresource=subresource, ident=ident, dry_run=dry_run
        )

    def page(
        self, rtype: ResourceType, namespace: str | None, match: Matcher, limit: int, token: str
    ) -> tuple[list[Obj], Obj]:
        """One page of a LIST: the items and the list metadata (``continue`` when more)."""
        items = self.select(rtype, namespace, match)
        start = int(base64.b64decode(token)) if token else 0
        limit = limit or len(items)
        meta: Obj = {"resourceVersion": str(self.rv)}
        if start + limit < len(items):
            meta["continue"] = base64.b64encode(str(start + limit).encode()).decode()
            meta["remainingItemCount"] = len(items) - start - limit
        return items[start : start + limit], meta

    def put(self, obj: Obj, field_manager: str | None = None) -> Obj:
        """Store ``obj`` as another actor would: status kept, no admission checks."""
        rtype = self.type_of(obj)
        new = copy.deepcopy(obj) | {"apiVersion": rtype.api_version()}
        meta = new.setdefault("metadata", {})
        if rtype.namespaced and not meta.get("namespace"):
            raise ValueError(f"{rtype.kind} {meta.get('name')!r} needs metadata.namespace")
        old = self.objects.get(self.key(rtype, meta.get("namespace"), meta["name"]))
        meta.pop("resourceVersion", None)
        meta.setdefault("uid", old["metadata"]["uid"] if old else str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", old["metadata"]["creationTimestamp"] if old else now())
        changed = old is not None and _content(old) != _content(new)
        meta["generation"] = (old["metadata"].get("generation", 1) if old else 1) + int(changed)
        if "managedFields" not in meta and old and old["metadata"].get("managedFields"):
            meta["managedFields"] = copy.deepcopy(old["metadata"]["managedFields"])
        if field_manager:
            base = copy.deepcopy(old) if old else None
            if base is not None:
                base["metadata"]["managedFields"] = meta.get("managedFields", [])
            record_update(base, new, (field_manager, "Update", ""))
        gone = old is not None and meta.get("deletionTimestamp") and not meta.get("finalizers")
        return self.commit(rtype, new, "DELETED" if gone else "MODIFIED" if old else "ADDED")


def _check_name(obj: Obj, name: str) -> None:
    given = obj["metadata"].setdefault("name", name)
    if given != name:
        message = f"the name of the object ({given}) does not match the name on the URL ({name})"
        raise ApiError(400, message)
