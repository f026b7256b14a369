"""The rules Kueue applies to a Topology's levels, in plainer words.

They mirror the Topology CRD (kueue.x-k8s.io/v1beta2, v0.19): ``spec.levels``
holds 1 to 16 entries, each a node label key of at most 316 characters; its
CEL rules refuse a label listed twice and ``kubernetes.io/hostname`` anywhere
but last, and make the list immutable (``self == oldSelf``). The immutability
needs the stored object, so the topology service checks it; everything here
looks at one list. Rule identifiers are stable: clients and tests match on them.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from typing import Any

from queues import names
from queues.errors import FieldError

MIN_LEVELS, MAX_LEVELS = 1, 16
# The CRD's maxLength for a level's nodeLabel: one less than the longest
# qualified name (253-character prefix, '/', 63-character name).
MAX_LEVEL_LENGTH = 316
HOSTNAME = "kubernetes.io/hostname"


def level_errors(field: str, levels: Any) -> list[FieldError]:
    """Every broken rule of ``levels``: node-label keys, widest domain first."""
    if not isinstance(levels, list):
        return [FieldError(field, "type", "must be a list of node label keys, widest first")]
    errors: list[FieldError] = []
    if len(levels) < MIN_LEVELS:
        errors.append(
            FieldError(
                field,
                "min-levels",
                "must list at least one level: a node label key such as "
                "topology.kubernetes.io/zone, widest first",
            )
        )
    if len(levels) > MAX_LEVELS:
        errors.append(
            FieldError(
                field,
                "max-levels",
                f"has {len(levels)} levels; Kueue allows at most {MAX_LEVELS}",
            )
        )
    first_at: dict[str, int] = {}
    for index, level in enumerate(levels):
        path = f"{field}[{index}]"
        if not isinstance(level, str):
            errors.append(FieldError(path, "type", "must be a node label key (a string)"))
            continue
        problem = names.qualified_name_error(level)
        if problem:
            errors.append(FieldError(path, "label-key", problem))
        elif len(level) > MAX_LEVEL_LENGTH:
            errors.append(
                FieldError(
                    path,
                    "level-length",
                    f"is {len(level)} characters long; Kueue allows at most "
                    f"{MAX_LEVEL_LENGTH} for a level's node label",
                )
            )
        if level in first_at:
            errors.append(
                FieldError(
                    path,
                    "duplicate-level",
                    f"{level!r} is already level {first_at[level]}; each level is a "
                    "different node label",
                )
            )
        first_at.setdefault(level, index)
        if level == HOSTNAME and index != len(levels) - 1:
            errors.append(
                FieldError(
                    path,
                    "hostname-last",
                    f"{HOSTNAME} can only be the last (lowest) level: one node is the "
                    "narrowest domain there is",
                )
            )
    return errors
