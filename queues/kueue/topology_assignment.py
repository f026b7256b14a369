"""Kueue's ``podSetAssignments[].topologyAssignment`` (v1beta2): where an
admitted pod set's pods go, as pods per domain of the lowest topology level
(only ``kubernetes.io/hostname`` when the topology has it).

The stored form is compressed into ``slices``: per level, the domains' values
either ``universal`` (all the same) or ``individual`` (``roots`` between an
optional common ``prefix`` and ``suffix``), and the pod counts ``universal`` or
``individual``. ``decode`` reads every variation; ``encode`` writes the plain
one (one slice, individual values and counts), which Kueue reads as well.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

HOSTNAME = "kubernetes.io/hostname"

# One domain: its value at each level (in the assignment's level order), and pods.
Domain = tuple[tuple[str, ...], int]


def encode(levels: Sequence[str], domains: Sequence[Domain]) -> dict[str, Any]:
    if not domains:
        return {"levels": list(levels), "slices": []}
    return {
        "levels": list(levels),
        "slices": [
            {
                "domainCount": len(domains),
                "valuesPerLevel": [
                    {"individual": {"roots": [values[i] for values, _ in domains]}}
                    for i in range(len(levels))
                ],
                "podCounts": {"individual": [pods for _, pods in domains]},
            }
        ],
    }


def decode(assignment: Mapping[str, Any]) -> tuple[list[str], list[Domain]]:
    """The levels and every domain with its pods; malformed slices are skipped."""
    levels = [str(level) for level in assignment.get("levels") or []]
    domains: list[Domain] = []
    for piece in assignment.get("slices") or []:
        count = int(piece.get("domainCount") or 0)
        per_level = piece.get("valuesPerLevel") or []
        if count < 1 or len(per_level) != len(levels):
            continue
        columns = [_values(entry, count) for entry in per_level]
        pods = _counts(piece.get("podCounts") or {}, count)
        if any(column is None for column in columns) or pods is None:
            continue
        for d in range(count):
            domains.append((tuple(column[d] for column in columns if column), pods[d]))
    return levels, domains


def pods_per_node(assignment: Mapping[str, Any]) -> dict[str, int] | None:
    """Node name -> pods, when the assignment is by hostname; else None."""
    levels, domains = decode(assignment)
    if not levels or levels[-1] != HOSTNAME:
        return None
    placed: dict[str, int] = {}
    for values, pods in domains:
        placed[values[-1]] = placed.get(values[-1], 0) + pods
    return placed


def _values(entry: Mapping[str, Any], count: int) -> list[str] | None:
    if "universal" in entry:
        return [str(entry["universal"])] * count
    individual = entry.get("individual") or {}
    roots = individual.get("roots") or []
    if len(roots) != count:
        return None
    prefix, suffix = individual.get("prefix") or "", individual.get("suffix") or ""
    return [f"{prefix}{root}{suffix}" for root in roots]


def _counts(entry: Mapping[str, Any], count: int) -> list[int] | None:
    if "universal" in entry:
        return [int(entry["universal"])] * count
    individual = entry.get("individual") or []
    if len(individual) != count:
        return None
    return [int(pods) for pods in individual]
