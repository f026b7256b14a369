"""The state behind :class:`tests.kube.apiserver.FakeApiServer`.

Resource types, the object store (one global resourceVersion counter, a bounded event
history for watches), label/field selectors, the three patch formats and a simplified
server-side apply. Everything that touches the store runs under ``Store.lock``; the HTTP
layer lives in ``apiserver.py``.
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]
Path = tuple[str, ...]
Key = tuple[str, str, str, str]  # group, plural, namespace ("" when cluster-scoped), name

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def status_body(
    code: int, message: str, reason: str | None = None, details: Obj | None = None
) -> Obj:
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason or REASONS.get(code, "Unknown"),
        "code": code,
    }
    if details:
        body["details"] = details
    return body


class ApiError(Exception):
    """A refused request, answered as a ``Status`` with ``code`` as the HTTP status."""

    def __init__(
        self, code: int, message: str, reason: str | None = None, details: Obj | None = None
    ) -> None:
        super().__init__(message)
        self.code, self.message, self.reason, self.details = code, message, reason, details

    def status(self) -> Obj:
        return status_body(self.code, self.message, self.reason, self.details)


@dataclass(frozen=True)
class ResourceType:
    """One served resource. ``versions`` lists the preferred version first."""

    group: str
    versions: tuple[str, ...]
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool = True
    short_names: tuple[str, ...] = ()
    field_labels: tuple[str, ...] = ()

    @property
    def custom(self) -> bool:
        return self.group not in ("", "batch")

    @property
    def qualified(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def api_version(self, version: str | None = None) -> str:
        version = version or self.versions[0]
        return f"{self.group}/{version}" if self.group else version

    def not_found(self, name: str) -> ApiError:
        details = {"name": name, "group": self.group, "kind": self.plural}
        return ApiError(404, f'{self.qualified} "{name}" not found', "NotFound", details)


KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_RESOURCES = tuple(
    ResourceType(KUEUE_GROUP, ("v1beta2", "v1beta1"), plural, kind, namespaced, status, short)
    for plural, kind, namespaced, status, short in (
        ("resourceflavors", "ResourceFlavor", False, False, ("flavor", "flavors", "rf")),
        ("clusterqueues", "ClusterQueue", False, True, ("cq",)),
        ("cohorts", "Cohort", False, True, ()),
        ("workloadpriorityclasses", "WorkloadPriorityClass", False, False, ()),
        ("admissionchecks", "AdmissionCheck", False, True, ()),
        ("topologies", "Topology", False, False, ()),
        ("localqueues", "LocalQueue", True, True, ("queue", "queues", "lq")),
        ("workloads", "Workload", True, True, ("wl",)),
    )
)
JOBSET_RESOURCES = (ResourceType("jobset.x-k8s.io", ("v1alpha2",), "jobsets", "JobSet", True),)
KUBEFLOW_RESOURCES = (
    ResourceType("kubeflow.org", ("v1",), "pytorchjobs", "PyTorchJob", True),
    ResourceType("trainer.kubeflow.org", ("v1alpha1",), "trainjobs", "TrainJob", True),
    ResourceType(
        "trainer.kubeflow.org",
        ("v1alpha1",),
        "clustertrainingruntimes",
        "ClusterTrainingRuntime",
        False,
        status_subresource=False,
    ),
)
DEFAULT_CRDS = KUEUE_RESOURCES + JOBSET_RESOURCES + KUBEFLOW_RESOURCES
BUILTIN_RESOURCES = (
    ResourceType("", ("v1",), "namespaces", "Namespace", False, True, ("ns",), ("status.phase",)),
    ResourceType("", ("v1",), "nodes", "Node", False, True, ("no",), ("spec.unschedulable",)),
    ResourceType(
        "", ("v1",), "pods", "Pod", True, True, ("po",), ("spec.nodeName", "status.phase")
    ),
    ResourceType("", ("v1",), "services", "Service", True, True, ("svc",)),
    ResourceType("batch", ("v1",), "jobs", "Job", True),
)
INITIAL_STATUS = {"Namespace": {"phase": "Active"}, "Pod": {"phase": "Pending"}}
SEED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SERVER_META = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")
APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
VERSION_INFO = {
    "major": "1",
    "minor": "33",
    "gitVersion": "v1.33.1",
    "gitCommit": "8adc0f041b8e7ad1d30e29cc59c6ae7a15e19828",
    "gitTreeState": "clean",
    "buildDate": "2025-05-15T08:19:08Z",
    "goVersion": "go1.24.2",
    "compiler": "gc",
    "platform": "linux/amd64",
}
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def group_doc(group: str, versions: Sequence[str]) -> Obj:
    """The body of ``GET /apis/{group}`` (without kind), also an entry of ``GET /apis``."""
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def resource_list(group: str, version: str, served: Sequence[ResourceType]) -> Obj:
    """The body of ``GET /apis/{group}/{version}`` (or ``/api/v1``)."""
    resources: list[Obj] = []
    for r in served:
        entry = {"name": r.plural, "singularName": r.kind.lower(), "namespaced": r.namespaced}
        resources.append(entry | {"kind": r.kind, "verbs": VERBS})
        if r.short_names:
            resources[-1]["shortNames"] = list(r.short_names)
        if r.status_subresource:
            status = {"name": f"{r.plural}/status", "singularName": "", "kind": r.kind}
            resources.append(
                status | {"namespaced": r.namespaced, "verbs": ["get", "patch", "update"]}
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


# --- selectors ---------------------------------------------------------------------------------

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"[-A-Za-z0-9_.]*"
_SET_TERM = re.compile(rf"^({_KEY})\s+(in|notin)\s*\(([^()]*)\)$")
_EQ_TERM = re.compile(rf"^({_KEY})\s*(==|=|!=)\s*({_VALUE})$")
_EXISTS_TERM = re.compile(rf"^(!?)\s*({_KEY})$")
Matcher = Callable[[Obj], bool]


def _split_terms(selector: str) -> list[str]:
    terms, depth, start = [], 0, 0
    for i, char in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(selector[start:i])
            start = i + 1
    terms.append(selector[start:])
    return [term.strip() for term in terms]


def label_matcher(selector: str | None) -> Matcher:
    """``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``, ``k in (a,b)``, ``k notin (a,b)``, ANDed."""
    requirements: list[tuple[str, str, frozenset[str]]] = []  # key, operator, values
    for term in _split_terms(selector) if selector and selector.strip() else []:
        if m := _SET_TERM.match(term):
            values = frozenset(value.strip() for value in m[3].split(","))
            requirements.append((m[1], m[2], values))
        elif m := _EQ_TERM.match(term):
            requirements.append((m[1], "notin" if m[2] == "!=" else "in", frozenset([m[3]])))
        elif m := _EXISTS_TERM.match(term):
            requirements.append((m[2], "!" if m[1] else "exists", frozenset()))
        else:
            raise ApiError(400, f"unable to parse requirement: found '{term}', in {selector!r}")

    def matches(obj: Obj) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        for key, operator, values in requirements:
            if operator == "exists":
                ok = key in labels
            elif operator == "!":
                ok = key not in labels
            else:  # a missing label is "not in" any set, as in Kubernetes
                ok = (labels.get(key) in values) == (operator == "in")
            if not ok:
                return False
        return True

    return matches


def field_matcher(selector: str | None, rtype: ResourceType) -> Matcher:
    """``metadata.name``/``metadata.namespace`` (plus a few per-type fields) with ``=``/``!=``."""
    allowed = {"metadata.name", "metadata.namespace", *rtype.field_labels}
    tests: list[tuple[list[str], bool, str]] = []
    for term in _split_terms(selector) if selector and selector.strip() else []:
        m = re.match(r"^([A-Za-z.]+)\s*(==|=|!=)\s*(.*)$", term)
        if not m:
            raise ApiError(400, f"invalid selector: '{selector}'; can't understand '{term}'")
        if m[1] not in allowed:
            raise ApiError(400, f'field label not supported: "{m[1]}"')
        tests.append((m[1].split("."), m[2] == "!=", m[3]))

    def matches(obj: Obj) -> bool:
        for path, negate, value in tests:
            actual = get_path(obj, tuple(path))
            text = str(actual).lower() if isinstance(actual, bool) else str(actual or "")
            if (text == value) == negate:
                return False
        return True

    return matches


# --- paths and patches -------------------------------------------------------------------------

_MISSING = object()


def get_path(obj: Any, path: Path) -> Any:
    for part in path:
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def set_path(obj: Obj, path: Path, value: Any) -> None:
    for part in path[:-1]:
        if not isinstance(obj.get(part), dict):
            obj[part] = {}
        obj = obj[part]
    obj[path[-1]] = copy.deepcopy(value)


def delete_path(obj: Obj, path: Path) -> None:
    parent = get_path(obj, path[:-1]) if len(path) > 1 else obj
    if isinstance(parent, dict):
        parent.pop(path[-1], None)
        if len(path) > 1 and not parent and path[0] == "metadata":
            delete_path(obj, path[:-1])  # no empty ``labels: {}`` left behind


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(text: str) -> list[str]:
    if text == "":
        return []
    if not text.startswith("/"):
        raise ApiError(400, f"invalid JSON pointer {text!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in text[1:].split("/")]


def _locate(doc: Any, parts: list[str], op: str) -> tuple[Any, str]:
    for part in parts[:-1]:
        if isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        elif isinstance(doc, dict) and part in doc:
            doc = doc[part]
        else:
            raise ApiError(422, f"jsonpatch {op} operation does not apply: doc is missing path")
    return doc, parts[-1]


def _index(container: list[Any], token: str, op: str, *, inserting: bool) -> int:
    limit = len(container) + (1 if inserting else 0)
    if token == "-" and inserting:
        return len(container)
    if not token.isdigit() or int(token) >= limit:
        raise ApiError(422, f"jsonpatch {op} operation does not apply: index {token} out of range")
    return int(token)


def _json_patch_op(doc: Any, op: Obj) -> Any:
    name, parts = op.get("op"), _pointer(str(op.get("path", "")))
    if name in ("move", "copy"):
        value = _json_patch_op(doc, {"op": "_get", "path": op.get("from", "")})
        if name == "move":
            doc = _json_patch_op(doc, {"op": "remove", "path": op.get("from", "")})
        return _json_patch_op(doc, {"op": "add", "path": op["path"], "value": value})
    if not parts:
        if name == "_get":
            return doc
        if name in ("add", "replace"):
            return copy.deepcopy(op.get("value"))
        raise ApiError(422, f"jsonpatch {name} operation does not apply to the whole document")
    parent, token = _locate(doc, parts, str(name))
    if isinstance(parent, list):
        index = _index(parent, token, str(name), inserting=name == "add")
        current = parent[index] if index < len(parent) else _MISSING
    elif isinstance(parent, dict):
        index, current = -1, parent.get(token, _MISSING)
    else:
        raise ApiError(422, f"jsonpatch {name} operation does not apply: parent is not a container")
    if name == "_get" or name == "test":
        if current is _MISSING:
            raise ApiError(422, f"jsonpatch {name} operation does not apply: doc is missing path")
        if name == "_get":
            return copy.deepcopy(current)
        if current != op.get("value"):
            raise ApiError(422, f"testing value {op.get('path')} failed: test failed")
    elif name == "add":
        if isinstance(parent, list):
            parent.insert(index, copy.deepcopy(op.get("value")))
        else:
            parent[token] = copy.deepcopy(op.get("value"))
    elif name in ("remove", "replace"):
        if current is _MISSING:
            raise ApiError(422, f"jsonpatch {name} operation does not apply: doc is missing path")
        if name == "remove":
            del parent[index if isinstance(parent, list) else token]
        else:
            parent[index if isinstance(parent, list) else token] = copy.deepcopy(op.get("value"))
    else:
        raise ApiError(400, f"Unexpected kind: {name}")
    return doc


def json_patch(doc: Obj, ops: Any) -> Any:
    """RFC 6902 JSON patch: add, remove, replace, move, copy, test."""
    if not isinstance(ops, list) or not all(isinstance(op, dict) for op in ops):
        raise ApiError(400, "the JSON patch must be a list of operation objects")
    result: Any = copy.deepcopy(doc)
    for op in ops:
        result = _json_patch_op(result, op)
    return result


# --- field ownership (a simplified managedFields) ----------------------------------------------

Identity = tuple[str, str, str]  # manager, operation ("Apply"/"Update"), subresource


def field_paths(obj: Obj, subresource: str = "") -> dict[Path, Any]:
    """The fields ownership is tracked at: top-level keys of ``spec`` (or ``status`` for the
    status subresource), each label and annotation, finalizers, ownerReferences and other
    top-level keys."""
    if subresource == "status":
        return {("status", k): v for k, v in (obj.get("status") or {}).items()}
    paths: dict[Path, Any] = {}
    for key, value in obj.items():
        if key in ("apiVersion", "kind", "status"):
            continue
        if key == "metadata" and isinstance(value, dict):
            for section in ("labels", "annotations"):
                for k, v in (value.get(section) or {}).items():
                    paths["metadata", section, k] = v
            for section in ("finalizers", "ownerReferences"):
                if section in value:
                    paths["metadata", section] = value[section]
        elif key == "spec" and isinstance(value, dict):
            paths.update({("spec", k): v for k, v in value.items()})
        else:
            paths[(key,)] = value
    return paths


def _coarse(path: Path) -> Path:
    if path[:1] == ("metadata",):
        return path[:3] if path[1:2] in (("labels",), ("annotations",)) else path[:2]
    return path[:2] if path[:1] in (("spec",), ("status",)) else path[:1]


def _leaves(fields: Obj, prefix: Path = ()) -> set[Path]:
    found: set[Path] = set()
    for key, child in fields.items():
        if not key.startswith("f:"):
            continue  # "." and k:/v: list keys are below the tracked granularity
        path = (*prefix, key[2:])
        found |= _leaves(child, path) if isinstance(child, dict) and child else {path}
    return {_coarse(path) for path in found}


def read_ownership(obj: Obj) -> dict[Identity, set[Path]]:
    owners: dict[Identity, set[Path]] = {}
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        ident = (entry.get("manager", ""), entry.get("operation", ""), entry.get("subresource", ""))
        owners[ident] = owners.get(ident, set()) | _leaves(entry.get("fieldsV1") or {})
    return owners


def write_ownership(obj: Obj, owners: dict[Identity, set[Path]], old: Obj | None) -> None:
    """Render ``owners`` as ``metadata.managedFields``, keeping an entry's time if unchanged."""
    previous = {
        (e.get("manager"), e.get("operation"), e.get("subresource", "")): e
        for e in ((old or {}).get("metadata") or {}).get("managedFields") or []
    }
    entries = []
    for ident, paths in owners.items():
        if not paths:
            continue
        fields: Obj = {}
        for path in sorted(paths):
            node = fields
            for part in path:
                node = node.setdefault(f"f:{part}", {})
        entry: Obj = {"manager": ident[0], "operation": ident[1], "apiVersion": obj["apiVersion"]}
        entry |= {"time": now(), "fieldsType": "FieldsV1", "fieldsV1": fields}
        if ident[2]:
            entry["subresource"] = ident[2]
        prior = previous.get(ident)
        if prior and prior.get("fieldsV1") == fields:
            entry["time"] = prior.get("time", entry["time"])
        entries.append(entry)
    meta = obj.setdefault("metadata", {})
    if entries:
        meta["managedFields"] = entries
    else:
        meta.pop("managedFields", None)


def record_update(old: Obj | None, new: Obj, ident: Identity) -> None:
    """Non-apply writes: the manager takes the fields whose value it changed, from everyone."""
    owners = read_ownership(old or new)
    before = field_paths(old or {}, ident[2])
    after = field_paths(new, ident[2])
    changed = {p for p in before.keys() | after.keys() if before.get(p, _MISSING) != after.get(p)}
    for paths in owners.values():
        paths.difference_update(changed)
    owners[ident] = owners.get(ident, set()) | (changed & after.keys())
    write_ownership(new, owners, old)


def apply_configuration(old: Obj, applied: Obj, ident: Identity, *, force: bool) -> Obj:
    """Merge an applied configuration into ``old`` (server-side apply, top-level granularity)."""
    owners = read_ownership(old)
    wanted = field_paths(applied, ident[2])
    conflicts: dict[Path, set[str]] = {}
    for path, value in wanted.items():
        if get_path(old, path) == value:
            continue  # same value: ownership is shared, never a conflict
        for other, paths in owners.items():
            if other != ident and path in paths:
                conflicts.setdefault(path, set()).add(other[0])
    if conflicts and not force:
        causes = [
            {"type": "FieldManagerConflict", "message": f'conflict with "{m}"', "field": field}
            for path, managers in sorted(conflicts.items())
            for m in sorted(managers)
            for field in ["." + ".".join(path)]
        ]
        listing = "; ".join(f"{c['message']}: {c['field']}" for c in causes)
        plural = "conflict" if len(causes) == 1 else "conflicts"
        message = f"Apply failed with {len(causes)} {plural}: {listing}"
        raise ApiError(409, message, "Conflict", {"causes": causes})
    for other, paths in owners.items():
        if other != ident:
            paths.difference_update(conflicts)
    result = copy.deepcopy(old)
    for path in owners.get(ident, set()) - wanted.keys():
        if not any(path in paths for other, paths in owners.items() if other != ident):
            delete_path(result, path)  # applied before, omitted now, nobody else wants it
    for path, value in wanted.items():
        set_path(result, path, value)
    if ident[2] != "status" and isinstance(applied.get("spec"), dict):
        result.setdefault("spec", {})
    owners[ident] = set(wanted)
    write_ownership(result, owners, old)
    return result


# --- the store ---------------------------------------------------------------------------------


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
        ownership, no-op detection and finalizer-driven removal."""
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
