"""The policy editor's forms: label and taint lines, the quota table, and the
changes a submitted form makes against what the page showed."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from django.http import QueryDict

from frontend.policy_kinds import MAX_FLAVORS, MAX_GROUPS, QUOTA_FIELDS, QUOTA_LABELS, Field, Kind
from queues.api.conventions import flatten_errors
from queues.errors import FieldError, PolicyInvalid

# --------------------------------------------------------------------- the form
#
# A form's values are strings, as the inputs hold them; node labels and taints
# are lines of text; resource groups are lists of dicts of strings:
#   [{"covered": [resource, ...], "flavors": [{"name": flavor,
#     "resources": [{"nominal_quota": "8", "borrowing_limit": "", ...}]}]}]
# with one resources entry per covered resource, in order. Quota inputs are
# named rg-<group>-f-<flavor>-r-<resource>-<field>, so an error's field path
# (resource_groups[0].flavors[1].resources[0].lending_limit) names its input.


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _taint_line(taint: Mapping[str, Any]) -> str:
    value = taint.get("value") or ""
    key = f"{taint.get('key', '')}={value}" if value else str(taint.get("key", ""))
    return f"{key}:{taint.get('effect', '')}"


def parse_labels(text: str) -> tuple[dict[str, str], list[FieldError]]:
    labels: dict[str, str] = {}
    errors: list[FieldError] = []
    for number, line in enumerate(_lines(text), 1):
        key, sep, value = line.partition("=")
        if not sep:
            errors.append(
                FieldError("node_labels", "format", f"line {number}: {line!r} is not key=value")
            )
            continue
        key = key.strip()
        if key in labels:
            errors.append(
                FieldError("node_labels", "duplicate-key", f"line {number}: {key!r} is set twice")
            )
        labels[key] = value.strip()
    return labels, errors


def parse_taints(text: str) -> tuple[list[dict[str, str]], list[FieldError]]:
    taints: list[dict[str, str]] = []
    errors: list[FieldError] = []
    for number, line in enumerate(_lines(text), 1):
        head, sep, effect = line.rpartition(":")
        if not sep:
            errors.append(
                FieldError(
                    "node_taints",
                    "format",
                    f"line {number}: {line!r} is not key=value:Effect (or key:Effect)",
                )
            )
            continue
        key, _, value = head.partition("=")
        taint = {"key": key.strip(), "effect": effect.strip()}
        if value.strip():
            taint["value"] = value.strip()
        taints.append(taint)
    return taints, errors


def parse_levels(text: str) -> tuple[list[str], list[FieldError]]:
    """A topology's levels, one node label per line; the policy rules judge them."""
    return _lines(text), []


_LINE_PARSERS: dict[str, Callable[[str], tuple[Any, list[FieldError]]]] = {
    "node_labels": parse_labels,
    "node_taints": parse_taints,
    "levels": parse_levels,
}


def _shown(field: Field, value: Any) -> str:
    if field.name == "node_labels":
        return "\n".join(f"{key}={val}" for key, val in (value or {}).items())
    if field.name == "node_taints":
        return "\n".join(_taint_line(taint) for taint in value or [])
    if field.name == "levels":
        return "\n".join(value or [])
    return "" if value is None else str(value)


def groups_from_snapshot(raw: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "covered": list(group["covered_resources"]),
            "flavors": [
                {
                    "name": flavor["name"],
                    "resources": [
                        {q: "" if quota.get(q) is None else str(quota[q]) for q in QUOTA_FIELDS}
                        for quota in flavor["resources"]
                    ],
                }
                for flavor in group["flavors"]
            ],
        }
        for group in raw
    ]


def groups_to_data(groups: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The API's ``resource_groups`` (empty limits left out: no limit)."""
    return [
        {
            "covered_resources": list(group["covered"]),
            "flavors": [
                {
                    "name": flavor["name"],
                    "resources": [
                        {
                            "name": group["covered"][r] if r < len(group["covered"]) else "",
                            "nominal_quota": quota["nominal_quota"],
                            **{
                                q: quota[q]
                                for q in ("borrowing_limit", "lending_limit")
                                if quota[q] != ""
                            },
                        }
                        for r, quota in enumerate(flavor["resources"])
                    ],
                }
                for flavor in group["flavors"]
            ],
        }
        for group in groups
    ]


def form_values(kind: Kind, snapshot: Mapping[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {"name": snapshot.get("name") or ""}
    for field in kind.fields:
        values[field.name] = _shown(field, snapshot.get(field.name))
    if kind.quotas:
        values["resource_groups"] = groups_from_snapshot(snapshot.get("resource_groups") or [])
    return values


def _count(post: QueryDict, key: str, limit: int) -> int:
    try:
        return max(0, min(int(post.get(key, "0")), limit))
    except ValueError:
        return 0


def _resources(text: str) -> list[str]:
    return [part for part in re.split(r"[\s,]+", text.strip()) if part]


def _blank_flavor(name: str, covered: list[str]) -> dict[str, Any]:
    return {"name": name, "resources": [dict.fromkeys(QUOTA_FIELDS, "") for _ in covered]}


def read_groups(post: QueryDict, action: str) -> tuple[list[dict[str, Any]], str]:
    """The quota table as posted, with flavors ticked "remove" left out (and a
    group left with none gone), and the row ``action`` adds; plus a note on
    what was added."""
    groups: list[dict[str, Any]] = []
    note = ""
    for g in range(_count(post, "rg", MAX_GROUPS)):
        covered = _resources(post.get(f"rg-{g}-covered", ""))
        flavors = []
        for f in range(_count(post, f"rg-{g}-flavors", MAX_FLAVORS)):
            prefix = f"rg-{g}-f-{f}"
            name = post.get(f"{prefix}-name", "").strip()
            if not name or post.get(f"{prefix}-remove"):
                continue
            flavors.append(
                {
                    "name": name,
                    "resources": [
                        {q: post.get(f"{prefix}-r-{r}-{q}", "").strip() for q in QUOTA_FIELDS}
                        for r in range(len(covered))
                    ],
                }
            )
        added = post.get(f"rg-{g}-add-flavor", "").strip()
        if action == f"add-flavor-{g}" and added:
            flavors.append(_blank_flavor(added, covered))
            note = f"Added flavor {added}: fill in its quotas, then Plan."
        if flavors:
            groups.append({"covered": covered, "flavors": flavors})
    if action == "add-group":
        covered = _resources(post.get("rg-new-covered", ""))
        name = post.get("rg-new-flavor", "").strip()
        if covered and name:
            groups.append({"covered": covered, "flavors": [_blank_flavor(name, covered)]})
            note = (
                f"Added a group for {', '.join(covered)} with flavor {name}: "
                "fill in its quotas, then Plan."
            )
        else:
            note = "To add a resource group, name its resources and pick a flavor."
    return groups, note


def read_form(
    kind: Kind, post: QueryDict, base: Mapping[str, Any], action: str
) -> tuple[dict[str, Any], str]:
    """The posted values over ``base`` (a field the form did not send keeps
    its value there)."""
    values = dict(base)
    if "name" in post:
        values["name"] = post.get("name", "").strip()
    for field in kind.fields:
        if field.name in post:
            raw = post.get(field.name, "")
            values[field.name] = "\n".join(_lines(raw)) if field.widget == "lines" else raw.strip()
    note = ""
    if kind.quotas and "rg" in post:
        values["resource_groups"], note = read_groups(post, action)
    return values, note


def _normal(field: Field, text: str) -> Any:
    parser = _LINE_PARSERS.get(field.name)
    if parser is None:
        return text.strip()
    parsed, errors = parser(text)
    return text if errors else parsed


def changes(
    kind: Kind, values: Mapping[str, Any], stored: Mapping[str, Any] | None
) -> tuple[dict[str, Any], list[FieldError]]:
    """What to send to the service: on an edit only the fields that differ from
    ``stored`` (what the form showed); on a create every field not left empty.
    Plus the errors of lines that do not parse."""
    data: dict[str, Any] = {}
    errors: list[FieldError] = []
    if stored is None:
        data["name"] = values.get("name", "")
    for field in kind.fields:
        raw = values.get(field.name, "")
        if stored is not None and _normal(field, raw) == _normal(field, stored[field.name]):
            continue
        parser = _LINE_PARSERS.get(field.name)
        if parser is not None:
            parsed, problems = parser(raw)
            errors += problems
        else:
            parsed = None if (raw == "" and field.nullable) else raw
        if stored is None and parsed in (None, "", {}, []):
            continue  # left empty: the default (or the queue class) decides
        data[field.name] = parsed
    if kind.quotas:
        groups = values.get("resource_groups", [])
        if stored is None:
            if groups:
                data["resource_groups"] = groups_to_data(groups)
        elif groups != stored["resource_groups"]:
            data["resource_groups"] = groups_to_data(groups)
    return data, errors


def validated(kind: Kind, data: dict[str, Any], obj: Any) -> dict[str, Any]:
    """``data`` through the API's serializer: the same types, choices and error
    paths as a request to ``/api/v1/``."""
    serializer = kind.serializer(obj, data=data, partial=obj is not None)
    if not serializer.is_valid():
        raise PolicyInvalid(flatten_errors(serializer.errors))
    return dict(serializer.validated_data)


_QUOTA_PATH = re.compile(
    r"^resource_groups\[(\d+)\](?:\.flavors\[(\d+)\](?:\.resources\[(\d+)\](?:\.(\w+))?)?)?"
)


def inputs_of(path: str) -> set[str]:
    """The form inputs an error's field path points at."""
    match = _QUOTA_PATH.match(path)
    if match:
        g, f, r, q = match.groups()
        if f is None:
            return {f"rg-{g}"}
        if r is not None and q in QUOTA_FIELDS:
            return {f"rg-{g}-f-{f}-r-{r}-{q}"}
        return {f"rg-{g}-f-{f}"}
    return {re.split(r"[.\[]", path, maxsplit=1)[0]}


def quota_table(groups: list[Mapping[str, Any]], invalid: set[str]) -> list[dict[str, Any]]:
    """The quota table as the template draws it: one row per flavor × resource."""
    table = []
    for g, group in enumerate(groups):
        flavors = []
        for f, flavor in enumerate(group["flavors"]):
            prefix = f"rg-{g}-f-{f}"
            rows = []
            for r, resource in enumerate(group["covered"]):
                quota = flavor["resources"][r] if r < len(flavor["resources"]) else {}
                inputs = []
                for q in QUOTA_FIELDS:
                    name = f"{prefix}-r-{r}-{q}"
                    inputs.append(
                        {
                            "name": name,
                            "value": quota.get(q, ""),
                            "label": f"{QUOTA_LABELS[q]} of {flavor['name']} {resource}",
                            "invalid": name in invalid,
                        }
                    )
                rows.append({"resource": resource, "inputs": inputs})
            flavors.append(
                {
                    "index": f,
                    "name": flavor["name"],
                    "prefix": prefix,
                    "rows": rows,
                    "span": max(1, len(rows)),
                    "invalid": prefix in invalid,
                }
            )
        table.append(
            {
                "index": g,
                "covered": ", ".join(group["covered"]),
                "flavors": flavors,
                "invalid": f"rg-{g}" in invalid,
            }
        )
    return table


def form_sections(
    kind: Kind, values: Mapping[str, Any], invalid: set[str], obj: Any
) -> list[tuple[str, list[dict[str, Any]]]]:
    sections: dict[str, list[dict[str, Any]]] = {}
    for field in kind.fields:
        value = values.get(field.name, "")
        options = field.options(obj) if field.options else []
        if field.widget == "select" and value not in {v for v, _ in options}:
            options = [*options, (value, value)]  # keep what is stored, even if unknown
        frozen = field.frozen(obj) if field.frozen is not None and obj is not None else ""
        sections.setdefault(field.section, []).append(
            {
                "name": field.name,
                "label": field.label,
                "widget": field.widget,
                "value": value,
                "options": options,
                "help": frozen or field.help,
                "invalid": field.name in invalid,
                "readonly": bool(frozen),
            }
        )
    return list(sections.items())
