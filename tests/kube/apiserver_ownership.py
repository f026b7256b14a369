"""Field ownership and server-side apply for the loopback API-server double.

A simplified ``metadata.managedFields``: ownership is tracked at the granularity of
top-level ``spec``/``status`` keys, single labels and annotations, finalizers and owner
references, and for the status list-maps of ``apiserver_listmaps`` (a Workload's
``admissionChecks``, ``conditions``) at the granularity of one entry, spelt
``f:admissionChecks`` -> ``k:{"name":"berth-approval"}`` as a real server does; an applied
entry replaces the stored entry with its key whole. ``record_update`` hands changed fields
to the writer of a non-apply request and ``apply_configuration`` merges an applied
configuration, refusing conflicts unless forced.
It is its own module because apply is the subtlest behaviour of the double, and the store
needs only these few functions of it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from tests.kube.apiserver_listmaps import invalid, list_map_errors, status_list_maps
from tests.kube.apiserver_patches import delete_path, entry_segment, get_path, set_path
from tests.kube.apiserver_resources import ApiError, Obj, Path, now

Identity = tuple[str, str, str]  # manager, operation ("Apply"/"Update"), subresource
_MISSING = object()  # a default that equals no stored value


def field_paths(obj: Obj, subresource: str = "") -> dict[Path, Any]:
    """The fields ownership is tracked at: top-level keys of ``spec`` (or ``status`` for the
    status subresource; each entry of a list-map there), each label and annotation,
    finalizers, ownerReferences and other top-level keys."""
    if subresource == "status":
        list_maps = status_list_maps(obj)
        paths: dict[Path, Any] = {}
        for field, value in (obj.get("status") or {}).items():
            key = list_maps.get(field)
            if key is None or not isinstance(value, list):
                paths["status", field] = value
                continue
            for entry in value:
                if isinstance(entry, dict) and key in entry:
                    paths["status", field, entry_segment({key: entry[key]})] = entry
        return paths
    paths = {}
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
    if path[:1] == ("status",) and len(path) > 2 and path[2].startswith("k:"):
        return path[:3]  # one list-map entry
    return path[:2] if path[:1] in (("spec",), ("status",)) else path[:1]


def _leaves(fields: Obj, prefix: Path = ()) -> set[Path]:
    found: set[Path] = set()
    for key, child in fields.items():
        if key.startswith("k:"):
            found.add((*prefix, key))  # a list-map entry: owned whole
            continue
        if not key.startswith("f:"):
            continue  # "." and v: list keys are below the tracked granularity
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
                node = node.setdefault(part if part.startswith("k:") else f"f:{part}", {})
            item = get_path(obj, path) if path[-1].startswith("k:") else None
            if isinstance(item, dict):  # an entry lists its fields, as a real server's does
                node |= {".": {}} | {f"f:{field}": {} for field in sorted(item)}
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


def field_name(path: Path) -> str:
    """A path as apply conflicts name it: ``.status.admissionChecks[name="berth-approval"]``."""
    text = ""
    for part in path:
        if part.startswith("k:"):
            text += "".join(f"[{k}={json.dumps(v)}]" for k, v in json.loads(part[2:]).items())
        else:
            text += f".{part}"
    return text


def apply_configuration(old: Obj, applied: Obj, ident: Identity, *, force: bool) -> Obj:
    """Merge an applied configuration into ``old`` (server-side apply at the granularity of
    ``field_paths``)."""
    if ident[2] == "status" and (broken := list_map_errors(applied)):
        raise invalid(applied, broken)  # entries without a key, or two with one key
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
            for field in [field_name(path)]
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
