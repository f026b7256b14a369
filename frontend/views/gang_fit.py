"""Gang fit: per topology-aware flavor, the free GPUs of each node now, the
largest gang (nodes x GPUs per node) one domain of each topology level holds,
and how scattered the free GPUs have been over time. Every signed-in user reads
it (node names and free GPUs belong to no team)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from cluster.gang_fit import gang_fit_maps
from cluster.models import GangFitSnapshot
from frontend.charts.gang_fit import format_share, fragmentation_over_time, gang_text
from frontend.views.common import page
from queues.engine.gang_fit import ANYWHERE, GangFitMap, gang_sizes
from queues.engine.topology import HOSTNAME

# How far back the chart reaches.
HISTORY = timedelta(days=7)


def _level_title(level: str, flavor: str) -> str:
    if level == ANYWHERE:
        return f"anywhere in {flavor}"
    if level == HOSTNAME:
        return "one node"
    return f"one {level.rsplit('/', 1)[-1]} ({level})"


def _largest_rows(found: GangFitMap) -> list[dict[str, Any]]:
    """Per GPUs-per-node size, the largest gang each level holds (``3 × 8``)."""
    node_gpus = max((row["gpus"] for row in found.node_rows), default=0)
    rows = []
    for size in gang_sizes(node_gpus):
        cells = []
        for level in (ANYWHERE, *found.levels):
            gang = found.largest_at(level, size)
            path = gang.domain if gang and gang.pods and level != ANYWHERE else ""
            # The domain's own label value; its path (block/rack/node) in the title.
            cells.append(
                {
                    "text": gang_text(gang.pods if gang else 0, size),
                    "domain": path.rsplit("/", 1)[-1],
                    "path": path,
                }
            )
        rows.append({"size": size, "cells": cells})
    return rows


def _node_rows(found: GangFitMap) -> list[dict[str, Any]]:
    shown = [level for level in found.levels if level != HOSTNAME]
    return [
        {
            "name": row["name"],
            "domains": [row["domains"].get(level, "") for level in shown],
            "free": f"{row['free_gpus']:,} of {row['gpus']:,}",
            "whole": row["gpus"] > 0 and row["free_gpus"] >= row["gpus"],
            "used": row["free_gpus"] == 0,
        }
        for row in found.node_rows
    ]


@login_required
def gang_fit_page(request: HttpRequest) -> HttpResponse:
    maps = gang_fit_maps()
    names = [found.flavor for found in maps]
    wanted = request.GET.get("flavor") or (names[0] if names else "")
    context: dict[str, Any] = {"flavors": names, "flavor": wanted, "errors": []}
    if names and wanted not in names:
        context["errors"] = [
            {
                "field": "flavor",
                "rule": "topology-aware-flavor",
                "message": f"{wanted!r} is not a flavor that names a topology; "
                f"the flavors with a gang-fit map are {', '.join(names)}",
            }
        ]
        response = page(request, "frontend/gang_fit.html", context, nav="gang-fit", live=False)
        response.status_code = 400
        return response
    found = next((m for m in maps if m.flavor == wanted), None)
    if found is not None:
        since = timezone.now() - HISTORY
        history = GangFitSnapshot.objects.filter(flavor=found.flavor, at__gte=since).values(
            "at", "free_gpus", "stranded_gpus"
        )
        context |= {
            "map": found,
            "levels": [_level_title(level, found.flavor) for level in (ANYWHERE, *found.levels)],
            "domain_levels": [level for level in found.levels if level != HOSTNAME],
            "largest": _largest_rows(found),
            "nodes": _node_rows(found),
            "histogram": [{"free": free, "nodes": count} for free, count in found.free_histogram],
            "figures": {
                "nodes": f"{found.nodes:,}",
                "gpus": f"{found.gpus:,}",
                "free": f"{found.free_gpus:,}",
                "whole": f"{found.whole_free_nodes:,}",
                "stranded": f"{found.stranded_gpus:,}",
                "share": format_share(found.fragmentation),
            },
            "chart": fragmentation_over_time(history, found.flavor),
        }
    return page(request, "frontend/gang_fit.html", context, nav="gang-fit", charts=True)
