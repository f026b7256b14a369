"""Capacity planning (platform admins only; a 404 for everyone else): ask how
many GPUs of each flavor keep a queue class's waits under a target, by
replaying a window of recorded workloads (or a scenario) at other
capacities; follow the plan while the worker searches; read the answer per
flavor and the curve of waits against GPUs."""

from __future__ import annotations

from datetime import UTC, timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.utils import timezone

from frontend.charts.capacity import capacity_curve
from frontend.templatetags.berth import duration
from frontend.views.common import page
from queues.access import may_change_policy, refuse
from queues.engine.capacity import capacity_flavors
from queues.engine.scenario import parse
from queues.errors import FieldError, PolicyInvalid
from queues.reconcile import desired_objects
from whatif import capacity
from whatif.models import CapacityPlan, ReplayPartState, WhatIfSource, WhatIfState
from whatif.proposal import MAX_SCENARIO_BYTES, policy_document

TARGET_ROWS = 3
RECENT = 20
LOCAL_FORMAT = "%Y-%m-%dT%H:%M"  # <input type=datetime-local>, in UTC


def _admin_only(request: HttpRequest) -> None:
    if not may_change_policy(request.user):
        raise refuse(request, "capacity planning is for platform admins")


def _local(moment: Any) -> str:
    return moment.astimezone(UTC).strftime(LOCAL_FORMAT) if moment else ""


def gpus_text(gpus: int | None) -> str:
    return "—" if gpus is None else f"{gpus:,} GPU{'s' if gpus != 1 else ''}"


def answer_rows(flavor: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per target: what it asks, the GPUs it needs and the change."""
    rows = []
    node = flavor.get("node_gpus") or 0
    for answer in flavor.get("answers") or []:
        gpus, change = answer.get("gpus"), answer.get("change")
        if answer.get("served") is False:
            needed, change_text, tone = "—", "its queues do not use this flavor", ""
        elif gpus is None:
            needed = f"more than {gpus_text(answer.get('tried_up_to'))}"
            change_text, tone = "not found", "bad"
        else:
            needed = gpus_text(gpus)
            steps = abs(change or 0) // node if node else 0
            more = "more" if (change or 0) > 0 else "fewer"
            change_text = (
                "none" if not change else f"{change:+,} GPUs ({steps} {more} nodes of {node})"
            )
            tone = "good" if change is not None and change <= 0 else "warn"
        rows.append(
            {
                "target": f"p{answer['percentile']:g} wait of {answer['group']} ≤ "
                f"{duration(answer['max_wait'])}",
                "group": answer["group"],
                "needed": needed,
                "change": change_text,
                "tone": tone,
                "holds_today": {True: "yes", False: "no"}.get(answer.get("holds_today"), "—"),
            }
        )
    return rows


def result_view(plan: CapacityPlan) -> dict[str, Any]:
    """A finished plan's figures as the page shows them, per flavor."""
    result = plan.result or {}
    percentiles = result.get("percentiles") or {}
    targets = [
        {"group": t["queue"], "max_wait": t["max_wait"]} for t in plan.request.get("targets", [])
    ]
    groups = result.get("groups") or {}
    # The targets' groups and the queue classes with workloads in the replay.
    busy = {
        g
        for flavor in result.get("flavors") or []
        for point in flavor.get("curve") or []
        for g, figures in point["groups"].items()
        if figures.get("workloads")
    }
    shown = {t["group"] for t in targets} | {
        g for g, queues in groups.items() if g in busy and (len(queues) != 1 or queues[0] != g)
    }
    flavors = []
    for flavor in result.get("flavors") or []:
        curve = [
            {**point, "groups": {g: f for g, f in point["groups"].items() if g in shown}}
            for point in flavor.get("curve") or []
        ]
        flavors.append(
            {
                "name": flavor["flavor"],
                "current": gpus_text(flavor.get("current")),
                "node_gpus": flavor.get("node_gpus"),
                "needed": gpus_text(flavor.get("gpus")) if flavor.get("gpus") else None,
                "served": any(a.get("served", True) for a in flavor.get("answers") or []),
                "rows": answer_rows(flavor),
                "chart": capacity_curve(
                    curve,
                    {g: p for g, p in percentiles.items() if g in shown},
                    targets,
                    flavor=flavor["flavor"],
                    answer=flavor.get("gpus"),
                ),
            }
        )
    return {
        "flavors": flavors,
        "replays": result.get("replays"),
        "seconds": result.get("seconds"),
        "notes": result.get("notes") or [],
        "groups": {g: ", ".join(q) for g, q in sorted(groups.items()) if g in shown},
    }


def _form_targets(post: Any) -> list[dict[str, Any]]:
    rows = []
    for i in range(TARGET_ROWS):
        row = {key: str(post.get(f"target-{i}-{key}", "")).strip() for key in capacity.TARGET_KEYS}
        if any(row.values()):
            rows.append(row)
    return rows


def _scenario_text(request: HttpRequest) -> tuple[str, list[FieldError]]:
    upload = request.FILES.get("scenario_file")
    if upload is None:
        return request.POST.get("scenario", ""), []
    raw = upload.read(MAX_SCENARIO_BYTES + 1)
    if len(raw) > MAX_SCENARIO_BYTES:
        limit = MAX_SCENARIO_BYTES // 2**20
        return "", [FieldError("scenario", "too-large", f"the file is more than {limit} MiB")]
    try:
        return raw.decode("utf-8"), []
    except UnicodeDecodeError:
        return "", [FieldError("scenario", "encoding", "the file is not UTF-8 text")]


@login_required
def capacity_page(request: HttpRequest) -> HttpResponse:
    _admin_only(request)
    end = timezone.now().replace(second=0, microsecond=0)
    objects = desired_objects()
    classes = capacity.queue_classes(objects)
    offered = capacity_flavors(parse(policy_document(objects)).policy)
    form: dict[str, Any] = {
        "source": WhatIfSource.WINDOW.value,
        "window_start": _local(end - capacity.DEFAULT_WINDOW),
        "window_end": _local(end),
        "scenario": "",
        "growth": "1",
        "seeds": str(capacity.DEFAULT_SEEDS),
        "flavors": offered,
    }
    first = next(iter(c for c in ("training-large", *classes) if c in classes), "")
    targets = [{"queue": first, "percentile": "90", "max_wait": "1h"}]
    errors: list[FieldError] = []
    if request.method == "POST":
        form = {key: request.POST.get(key, "") for key in form}
        form["flavors"] = request.POST.getlist("flavors")
        targets = _form_targets(request.POST)
        scenario, errors = _scenario_text(request)
        form["scenario"] = scenario
        if "scenario_file" in request.FILES:
            form["source"] = WhatIfSource.SCENARIO.value
        if not errors:
            body = {
                "source": form["source"],
                "window_start": form["window_start"],
                "window_end": form["window_end"],
                "scenario": scenario,
                "targets": targets,
                "flavors": form["flavors"],
                "growth": form["growth"],
                "seeds": form["seeds"],
            }
            try:
                plan = capacity.create_plan(request.user, body)
            except PolicyInvalid as exc:
                errors = exc.errors
            else:
                return redirect("capacity-plan", plan.pk)
    rows = targets + [{}] * (TARGET_ROWS - len(targets))
    context = {
        "form": form,
        "targets": [
            {
                "index": i,
                **row,
                "errors": [e for e in errors if e.field.startswith(f"targets[{i}]")],
            }
            for i, row in enumerate(rows[:TARGET_ROWS])
        ],
        "errors": errors,
        # A target's errors show in its row; the others beside their field.
        "field_errors": {
            e.field.split("[")[0]: e for e in errors if not e.field.startswith("targets[")
        },
        "classes": classes,
        "offered": offered,
        "recent": CapacityPlan.objects.select_related("created_by").defer("replay_inputs")[:RECENT],
    }
    return page(request, "frontend/capacity.html", context, nav="capacity")


def replays_shown(plan: CapacityPlan) -> dict[str, Any] | None:
    """A plan whose replays were shared out among the workers: per worker,
    the replays it finished and their time, and the one it replays now; and
    how many were replayed ahead of the search and not asked for."""
    rows = plan.replays.values_list("worker", "state", "seconds", "asked", "flavor", "gpus")
    workers: dict[str, dict[str, Any]] = {}
    ahead = 0
    for worker, state, seconds, asked, flavor, gpus in rows:
        if not worker:  # queued, or ended before anyone took it
            continue
        shown = workers.setdefault(
            worker, {"name": worker, "done": 0, "seconds": 0.0, "replaying": None}
        )
        if state == ReplayPartState.DONE:
            shown["done"] += 1
            shown["seconds"] += seconds or 0.0
            ahead += not asked
        elif state == ReplayPartState.RUNNING and plan.state == WhatIfState.RUNNING:
            shown["replaying"] = f"{flavor} at {gpus} GPUs"
    if not workers:
        return None
    return {"workers": [workers[name] for name in sorted(workers)], "ahead": ahead}


@login_required
def capacity_plan(request: HttpRequest, plan_id: int) -> HttpResponse:
    _admin_only(request)
    plan = get_object_or_404(
        CapacityPlan.objects.select_related("created_by").defer("replay_inputs"), pk=plan_id
    )
    stale = (
        plan.state == WhatIfState.RUNNING
        and plan.heartbeat_at is not None
        and timezone.now() - plan.heartbeat_at > timedelta(minutes=10)
    )
    context = {
        "plan": plan,
        "targets": [
            f"p{t['percentile']:g} wait of {t['queue']} ≤ {duration(t['max_wait'])}"
            for t in plan.request.get("targets", [])
        ],
        "stale": stale,
        "elapsed": (plan.finished_at - plan.started_at).total_seconds()
        if plan.finished_at and plan.started_at
        else None,
        "found": result_view(plan) if plan.state == WhatIfState.SUCCEEDED else None,
        "shared": replays_shown(plan),
    }
    return page(
        request,
        "frontend/capacity_plan.html",
        context,
        nav="capacity",
        live=not plan.done,
        charts=True,
    )
