"""Status list-maps of Kueue kinds, and the Workload status validation, for the loopback
API-server double.

Some status lists in the Kueue CRDs are ``x-kubernetes-list-type: map``: an entry is known by
its key field (``name`` for a Workload's ``admissionChecks``, ``type`` for ``conditions``), so
server-side apply merges such a list entry by entry and tracks who owns each entry. That is how
several controllers share one list: Kueue adds the checks, and each check's controller applies
only its own entry. ``LIST_MAPS`` holds the ones the double knows (a test compares it with the
CRDs). ``status_errors`` is the part of the Workload schema a status write must meet, answered
as a real API server answers a CRD validation failure: 422 Invalid, naming the field paths.
"""

from __future__ import annotations

import re
from typing import Any

from tests.kube.apiserver_resources import KUEUE_GROUP, ApiError, Obj

# (group, kind) -> {status field: key field}
LIST_MAPS: dict[tuple[str, str], dict[str, str]] = {
    (KUEUE_GROUP, "Workload"): {"admissionChecks": "name", "conditions": "type"},
    (KUEUE_GROUP, "ClusterQueue"): {"conditions": "type"},
    (KUEUE_GROUP, "LocalQueue"): {"conditions": "type"},
    (KUEUE_GROUP, "AdmissionCheck"): {"conditions": "type"},
}
CHECK_STATES = ("Pending", "Ready", "Retry", "Rejected")
CHECK_REQUIRED = ("lastTransitionTime", "message", "name", "state")
MAX_CHECKS = 8
MAX_MESSAGE = 32768  # characters, as the API server counts maxLength
_DATE_TIME = re.compile(r"^\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)$")

Cause = tuple[str, str, str]  # reason, field, message


def _group_kind(obj: Obj) -> tuple[str, str]:
    return str(obj.get("apiVersion", "")).rpartition("/")[0], str(obj.get("kind", ""))


def status_list_maps(obj: Obj) -> dict[str, str]:
    """The list-map fields of ``obj``'s status and their key fields."""
    return LIST_MAPS.get(_group_kind(obj), {})


def _go_map(key: str, value: Any) -> str:
    return f'map[string]interface {{}}{{"{key}":"{value}"}}'  # how Go prints the entry


def list_map_errors(obj: Obj) -> list[Cause]:
    """Entries without their key, or two entries with one key."""
    causes: list[Cause] = []
    status = obj.get("status") or {}
    for field, key in status_list_maps(obj).items():
        items = status.get(field)
        if not isinstance(items, list):
            continue
        seen: set[Any] = set()
        for index, item in enumerate(items):
            path = f"status.{field}[{index}]"
            if not isinstance(item, dict) or key not in item:
                causes.append(("FieldValueRequired", f"{path}.{key}", "Required value"))
            elif item[key] in seen:
                message = f"Duplicate value: {_go_map(key, item[key])}"
                causes.append(("FieldValueDuplicate", path, message))
            else:
                seen.add(item[key])
    return causes


def _check_errors(checks: list[Any]) -> list[Cause]:
    field = "status.admissionChecks"
    causes: list[Cause] = []
    if len(checks) > MAX_CHECKS:
        message = f"Too many: {len(checks)}: must have at most {MAX_CHECKS} items"
        causes.append(("FieldValueTooMany", field, message))
    for index, entry in enumerate(checks):
        if not isinstance(entry, dict):
            continue  # reported by list_map_errors
        path = f"{field}[{index}]"
        for name in CHECK_REQUIRED:
            if name not in entry and name != "name":  # a missing name: list_map_errors
                causes.append(("FieldValueRequired", f"{path}.{name}", "Required value"))
        state = entry.get("state")
        if "state" in entry and state not in CHECK_STATES:
            supported = ", ".join(f'"{s}"' for s in CHECK_STATES)
            message = f'Unsupported value: "{state}": supported values: {supported}'
            causes.append(("FieldValueNotSupported", f"{path}.state", message))
        text = entry.get("message")
        if isinstance(text, str) and len(text) > MAX_MESSAGE:
            message = f"Too long: may not be more than {MAX_MESSAGE} bytes"
            causes.append(("FieldValueTooLong", f"{path}.message", message))
        when = entry.get("lastTransitionTime")
        if "lastTransitionTime" in entry and not (isinstance(when, str) and _DATE_TIME.match(when)):
            where = f"{path}.lastTransitionTime"
            message = f'Invalid value: "{when}": {where} in body must be of type date-time'
            message += f': "{when}"'
            causes.append(("FieldValueInvalid", where, message))
    return causes


def status_errors(obj: Obj) -> list[Cause]:
    """What a real API server refuses in ``obj``'s status (the rules the double knows)."""
    causes = list_map_errors(obj)
    checks = (obj.get("status") or {}).get("admissionChecks")
    if _group_kind(obj) == (KUEUE_GROUP, "Workload") and isinstance(checks, list):
        causes += _check_errors(checks)
    return causes


def invalid(obj: Obj, causes: list[Cause]) -> ApiError:
    """The 422 a real API server answers for a CRD object failing validation."""
    (group, kind), name = _group_kind(obj), obj.get("metadata", {}).get("name", "")
    listing = [f"{field}: {message}" for _, field, message in causes]
    text = listing[0] if len(listing) == 1 else "[" + ", ".join(listing) + "]"
    details = {
        "name": name,
        "group": group,
        "kind": kind,
        "causes": [{"reason": r, "message": m, "field": f} for r, f, m in causes],
    }
    return ApiError(422, f'{kind}.{group} "{name}" is invalid: {text}', "Invalid", details)


def check_status(obj: Obj) -> None:
    """Raise the API server's 422 when ``obj``'s status breaks a rule."""
    if causes := status_errors(obj):
        raise invalid(obj, causes)
