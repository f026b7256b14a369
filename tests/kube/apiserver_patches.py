"""Path helpers and the two document-patch formats of the loopback API-server double.

``get_path``/``set_path``/``delete_path`` address a field by a tuple of keys, where a
``k:{"name":"x"}`` key (managedFields' spelling) is the entry of a list-map whose key fields
have those values; ``merge_patch`` is RFC 7386 (also standing in for strategic merge on
built-in kinds) and ``json_patch`` is RFC 6902. These are pure functions on JSON-like values,
kept apart from the store so that the patch semantics can be read (and fixed) on their own.
"""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

from tests.kube.apiserver_resources import ApiError, Obj, Path

_MISSING = object()


def entry_segment(keys: Obj) -> str:
    """The path key of the list-map entry with these key fields: ``k:{"name":"x"}``."""
    return "k:" + json.dumps(keys, separators=(",", ":"))


def _entry_index(items: list[Any], segment: str) -> int | None:
    keys = json.loads(segment[2:])
    for index, item in enumerate(items):
        if isinstance(item, dict) and all(item.get(k) == v for k, v in keys.items()):
            return index
    return None


def _child(obj: Any, part: str) -> Any:
    if isinstance(obj, list) and part.startswith("k:"):
        index = _entry_index(obj, part)
        return _MISSING if index is None else obj[index]
    if isinstance(obj, dict) and part in obj:
        return obj[part]
    return _MISSING


def get_path(obj: Any, path: Path) -> Any:
    for part in path:
        obj = _child(obj, part)
        if obj is _MISSING:
            return None
    return obj


def set_path(obj: Obj, path: Path, value: Any) -> None:
    node: Any = obj
    for part, below in itertools.pairwise(path):
        child = _child(node, part)
        kind = list if below.startswith("k:") else dict
        if not isinstance(child, kind):
            if not isinstance(node, dict):
                raise ValueError(f"no list-map entry {part} to set {path} in")
            child = node[part] = kind()
        node = child
    if isinstance(node, list):
        index = _entry_index(node, path[-1])
        if index is None:
            node.append(copy.deepcopy(value))  # a new entry goes last
        else:
            node[index] = copy.deepcopy(value)  # the entry with the same key is replaced
    else:
        node[path[-1]] = copy.deepcopy(value)


def delete_path(obj: Obj, path: Path) -> None:
    parent = get_path(obj, path[:-1]) if len(path) > 1 else obj
    if isinstance(parent, list):
        index = _entry_index(parent, path[-1])
        if index is not None:
            del parent[index]
        if not parent:
            delete_path(obj, path[:-1])  # no empty ``admissionChecks: []`` left behind
    elif isinstance(parent, dict):
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
