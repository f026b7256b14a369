"""What-if (platform admins only; a 404 for everyone else): pick a window of
recorded workloads or paste a scenario file, change quotas, weights, lending
or preemption of some ClusterQueues, and compare today's policy with the
proposal side by side once the simulation (a Celery task) is done."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.utils import timezone

from frontend import charts
from frontend.templatetags.berth import duration
from frontend.views.common import page
from queues.access import may_change_policy, refuse
from queues.errors import FieldError, PolicyInvalid
from whatif import service as whatif
from whatif.models import WhatIfRun, WhatIfSource, WhatIfState
from whatif.scaleout import ENDED_WITH_THE_RUN

BLANK_ROWS = 4  # change rows a fresh form offers
MAX_ROWS = 50
RECENT_RUNS = 20
LOCAL_FORMAT = "%Y-%m-%dT%H:%M"  # <input type=datetime-local>, in UTC

# (key, label, kind, lower is better: True, False, or None for neither)
METRICS: list[tuple[str, str, str, bool | None]] = [
    ("avg_wait", "average wait", "duration", True),
    ("p50_wait", "p50 wait", "duration", True),
    ("p95_wait", "p95 wait", "duration", True),
    ("max_wait", "longest wait", "duration", True),
    ("never_admitted", "never admitted", "count", True),
    ("usage_percent", "usage of nominal quota", "percent", None),
    ("borrowed_hours", "borrowed ({unit}-hours)", "hours", None),
    ("lent_hours", "lent ({unit}-hours)", "hours", None),
    ("preemptions", "preemptions (its workloads evicted)", "count", True),
    ("gpu_hours_lost", "GPU-hours lost to preemption", "hours", True),
]
WAITS = {key for key, _, kind, _ in METRICS if kind == "duration"}


def _admin_only(request: HttpRequest) -> None:
    if not may_change_policy(request.user):
        raise refuse(request, "what-if is for platform admins")


def _unit(resource: str) -> str:
    return {"nvidia.com/gpu": "GPU", "cpu": "core", "memory": "GiB"}.get(resource, resource)


def _show(value: Any, kind: str, at_least: bool = False) -> str:
    if value is None:
        return "—"
    if kind == "duration":
        # Waits of workloads never admitted count until the window's end: at least.
        return ("≥ " if at_least else "") + duration(value)
    if kind == "percent":
        return f"{value:.0f}%"
    if kind == "hours":
        return f"{value:,.1f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _change(today: Any, proposal: Any, kind: str, lower_better: bool | None) -> tuple[str, str]:
    """The change as text and its tone (good, bad or none)."""
    if not isinstance(today, int | float) or not isinstance(proposal, int | float):
        return "—", ""
    delta = proposal - today
    # A change too small to show (under a second, a tenth of an hour, a point) is none.
    shown = _show(abs(delta), kind)
    if abs(delta) < 1e-9 or shown in ("0 s", "0.0", "0%"):
        return "same", ""
    sign = "+" if delta > 0 else "−"
    amount = shown.replace("%", " points") if kind == "percent" else shown
    # Relative to a figure that shows as zero, a ratio says nothing (0.0 → 0.7 is not +6155%).
    relative = (
        f" ({sign}{abs(delta / today):.0%})"
        if today and kind != "percent" and _show(today, kind) not in ("0 s", "0.0")
        else ""
    )
    tone = "" if lower_better is None else ("good" if (delta < 0) == lower_better else "bad")
    return f"{sign}{amount}{relative}", tone


def never_admitted_text(today: dict[str, Any], proposal: dict[str, Any]) -> str:
    """ "10 never admitted (baseline: 0)" when the proposal leaves more workloads
    unadmitted than today's policy, else ""."""
    more, baseline = proposal.get("never_admitted") or 0, today.get("never_admitted") or 0
    return f"{more:,} never admitted (baseline: {baseline:,})" if more > baseline else ""


def _wait_change(key: str, today: dict[str, Any], proposal: dict[str, Any]) -> tuple[str, str]:
    """A wait's change, claiming no more than the figures allow. A proposal
    that leaves more workloads unadmitted is never better at waiting (they
    wait on past the window's end): no good tone, and the reason instead of a
    shorter wait. Otherwise a lower bound (a figure with censored waits under
    it) can show neither a win for its side nor a loss for the other."""
    change, tone = _change(today.get(key), proposal.get(key), "duration", True)
    starved = never_admitted_text(today, proposal)
    if starved and tone != "bad":  # worse stays worse; anything else says why not better
        return f"not better: {starved}", "warn"
    if tone == "good" and key in (proposal.get("waits_at_least") or []):
        return f"{change}, uncertain", ""  # the proposal's figure is a lower bound
    if tone == "bad" and key in (today.get("waits_at_least") or []):
        return f"{change}, uncertain", ""  # today's figure is a lower bound
    return change, tone


def metric_rows(
    today: dict[str, Any] | None, proposal: dict[str, Any] | None, resource: str
) -> list[dict[str, str]]:
    """One row per metric: today | proposal | change."""
    today, proposal = today or {}, proposal or {}
    rows = []
    if "nominal" in today or "nominal" in proposal:
        old, new = today.get("nominal") or "—", proposal.get("nominal") or "—"
        rows.append(
            {
                "label": f"nominal quota ({_unit(resource)}s)",
                "today": old,
                "proposal": new,
                "change": "same" if old == new else "changed",
                "tone": "",
            }
        )
    for key, label, kind, lower_better in METRICS:
        if key in WAITS:
            change, tone = _wait_change(key, today, proposal)
        else:
            change, tone = _change(today.get(key), proposal.get(key), kind, lower_better)
        rows.append(
            {
                "key": key,
                "label": label.format(unit=_unit(resource)),
                "today": _show(today.get(key), kind, key in (today.get("waits_at_least") or [])),
                "proposal": _show(
                    proposal.get(key), kind, key in (proposal.get("waits_at_least") or [])
                ),
                "change": change,
                "tone": tone,
            }
        )
    return rows


def _waits_text(figures: dict[str, Any] | None) -> str:
    """ "p50 10 s · p95 ≥ 4 min · 3 never admitted" for one side of the check."""
    if not figures or not figures.get("workloads"):
        return "—"
    at_least = figures.get("waits_at_least") or []
    p50 = _show(figures.get("p50_wait"), "duration", "p50_wait" in at_least)
    p95 = _show(figures.get("p95_wait"), "duration", "p95_wait" in at_least)
    return f"p50 {p50} · p95 {p95} · {figures.get('never_admitted') or 0:,} never admitted"


def _dashboard_text(figures: dict[str, Any] | None) -> str:
    if not figures or not figures.get("admissions"):
        return "—"
    return (
        f"p50 {_show(figures.get('p50_wait'), 'duration')} · "
        f"p95 {_show(figures.get('p95_wait'), 'duration')} · {figures['admissions']:,} admissions"
    )


def fidelity_rows(result: dict[str, Any], names: list[str]) -> list[dict[str, str]]:
    """Today's policy replayed against what the cluster did in the window, per
    ClusterQueue: what sync recorded for the same workloads beside the replay,
    and the dashboard's hourly figures beside the replay counted their way."""
    rows = []
    by_name = {q["cluster_queue"]: q for q in result.get("queues") or []}
    for name in names:
        queue = by_name.get(name) or {}
        if queue.get("recorded") is None and not queue.get("dashboard"):
            continue
        dashboard = queue.get("dashboard") or {}
        rows.append(
            {
                "name": name,
                "recorded": _waits_text(queue.get("recorded")),
                "replayed": _waits_text(queue.get("today")),
                "dashboard": _dashboard_text(dashboard.get("recorded")),
                "dashboard_replayed": _dashboard_text(dashboard.get("replayed")),
            }
        )
    return rows


def starved_text(today: dict[str, Any] | None, proposal: dict[str, Any] | None) -> str:
    """The warning over a table whose proposal leaves more workloads unadmitted."""
    today, proposal = today or {}, proposal or {}
    more = proposal.get("never_admitted") or 0
    baseline = today.get("never_admitted") or 0
    if more <= baseline:
        return ""
    return (
        f"The proposal leaves {more:,} workload(s) never admitted (today's policy: "
        f"{baseline:,}). They count as waiting until the end, though they would wait "
        "longer: its waits are lower bounds, and not shown as better."
    )


def _wait_scale(values: list[float]) -> tuple[float, str]:
    biggest = max(values, default=0.0)
    if biggest < 120:
        return 1.0, "s"
    if biggest < 3 * 3600:
        return 60.0, "min"
    return 3600.0, "h"


def _sides(row: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    return row.get("today") or {}, row.get("proposal") or {}


def _busy(row: dict[str, Any], changed: set[str]) -> bool:
    """Whether a ClusterQueue's row is worth a table: it had workloads or was changed."""
    return row["cluster_queue"] in changed or any(s.get("workloads") for s in _sides(row))


def _p95_shift(row: dict[str, Any]) -> float:
    today, proposal = (side.get("p95_wait") for side in _sides(row))
    return abs((proposal or 0) - (today or 0))


def _figure(row: dict[str, Any], side: str, key: str, divide: float = 1.0) -> float | None:
    figure = (row.get(side) or {}).get(key)
    return None if figure is None else float(figure) / divide


def _p95_change(row: dict[str, Any]) -> str | None:
    starved = never_admitted_text(*_sides(row))
    return f"not better: {starved}" if starved else None


def _p95_chart(shown: list[dict[str, Any]]) -> charts.Chart:
    """Each shown ClusterQueue's p95 wait under both policies, in a unit that suits them."""
    waits = [
        float(side["p95_wait"])
        for q in shown
        for side in _sides(q)
        if side.get("p95_wait") is not None
    ]
    scale, unit = _wait_scale(waits)
    return charts.comparison(
        [
            {
                "cluster_queue": q["cluster_queue"],
                "today": _figure(q, "today", "p95_wait", scale),
                "proposal": _figure(q, "proposal", "p95_wait", scale),
                "change": _p95_change(q),
            }
            for q in shown
        ],
        f"p95 wait ({unit})",
        unit=unit,
    )


def _preemption_chart(shown: list[dict[str, Any]]) -> charts.Chart:
    """Preemptions under both policies, for the shown ClusterQueues that had any."""
    preempting = [
        q
        for q in shown
        if any((q.get(side) or {}).get("preemptions") for side in ("today", "proposal"))
    ]
    return charts.comparison(
        [
            {
                "cluster_queue": q["cluster_queue"],
                "today": _figure(q, "today", "preemptions"),
                "proposal": _figure(q, "proposal", "preemptions"),
            }
            for q in preempting
        ],
        "preemptions",
    )


def comparison(run: WhatIfRun) -> dict[str, Any]:
    """The side-by-side of a run (finished, or its figures so far): totals, a table per ClusterQueue
    that had workloads (or was changed), and charts of p95 wait and preemptions."""
    result = run.result or {}
    resource = str(result.get("resource") or "nvidia.com/gpu")
    totals = result.get("totals") or {}
    changed = {str(c.get("cluster_queue")) for c in run.changes}
    queues = result.get("queues") or []
    shown = sorted(
        (q for q in queues if _busy(q, changed)),
        key=lambda q: (q["cluster_queue"] not in changed, -_p95_shift(q), q["cluster_queue"]),
    )
    partial = result.get("partial") if run.state == WhatIfState.RUNNING else None
    compared = {
        "resource": resource,
        "totals": metric_rows(totals.get("today"), totals.get("proposal"), resource),
        "totals_starved": starved_text(totals.get("today"), totals.get("proposal")),
        "fidelity": fidelity_rows(result, [q["cluster_queue"] for q in shown]),
        "dashboard_hours": [
            datetime.fromisoformat(moment) for moment in result.get("dashboard_hours") or []
        ],
        "runs": totals,
        "queues": [
            {
                "name": q["cluster_queue"],
                "changed": q["cluster_queue"] in changed,
                "rows": metric_rows(q.get("today"), q.get("proposal"), resource),
                "starved": starved_text(q.get("today"), q.get("proposal")),
            }
            for q in shown
        ],
        "quiet": [q["cluster_queue"] for q in queues if not _busy(q, changed)],
        "p95_chart": _p95_chart(shown),
        "preemption_chart": _preemption_chart(shown),
        "notes": result.get("notes") or [],
        "runtime_sources": result.get("runtime_sources") or {},
        "partial": partial,
    }
    return so_far_wording(compared) if partial else compared


def so_far_wording(compared: dict[str, Any]) -> dict[str, Any]:
    """Figures so far: a workload not admitted yet may still be, so nothing is
    "never admitted" and nothing starved yet."""
    for rows in [compared["totals"], *(q["rows"] for q in compared["queues"])]:
        for row in rows:
            for key in ("label", "change"):
                row[key] = row[key].replace("never admitted", "not admitted yet")
    compared["totals_starved"] = ""
    for queue in compared["queues"]:
        queue["starved"] = ""
    return compared


def _blank_rows(count: int) -> list[dict[str, str]]:
    return [dict.fromkeys(whatif.CHANGE_KEYS, "") for _ in range(count)]


def _posted_rows(post: Any) -> list[dict[str, str]]:
    try:
        count = max(1, min(MAX_ROWS, int(post.get("rows") or BLANK_ROWS)))
    except ValueError:
        count = BLANK_ROWS
    return [
        {key: str(post.get(f"change-{i}-{key}", "")).strip() for key in whatif.CHANGE_KEYS}
        for i in range(count)
    ]


def _scenario_text(request: HttpRequest) -> tuple[str, list[FieldError]]:
    """The pasted scenario, or the uploaded file (which wins)."""
    upload = request.FILES.get("scenario_file")
    if upload is None:
        return request.POST.get("scenario", ""), []
    raw = upload.read(whatif.MAX_SCENARIO_BYTES + 1)
    if len(raw) > whatif.MAX_SCENARIO_BYTES:
        limit = whatif.MAX_SCENARIO_BYTES // 2**20
        return "", [FieldError("scenario", "too-large", f"the file is more than {limit} MiB")]
    try:
        return raw.decode("utf-8"), []
    except UnicodeDecodeError:
        return "", [FieldError("scenario", "encoding", "the file is not UTF-8 text")]


def _local(moment: Any) -> str:
    return moment.astimezone(UTC).strftime(LOCAL_FORMAT) if moment else ""


def _rows_with_errors(rows: list[dict[str, str]], errors: list[FieldError]) -> list[dict[str, Any]]:
    shown = []
    for i, row in enumerate(rows):
        prefix = f"changes[{i}]."
        shown.append(
            {
                "index": i,
                **row,
                "errors": {e.field[len(prefix) :]: e for e in errors if e.field.startswith(prefix)},
            }
        )
    return shown


@login_required
def whatif_page(request: HttpRequest) -> HttpResponse:
    _admin_only(request)
    errors: list[FieldError] = []
    end = timezone.now().replace(second=0, microsecond=0)
    form = {
        "source": WhatIfSource.WINDOW.value,
        "window_start": _local(end - whatif.DEFAULT_WINDOW),
        "window_end": _local(end),
        "scenario": "",
    }
    rows = _blank_rows(BLANK_ROWS)
    if request.method == "POST":
        form = {key: request.POST.get(key, "") for key in form}
        rows = _posted_rows(request.POST)
        if "add_rows" in request.POST:
            rows += _blank_rows(min(BLANK_ROWS, MAX_ROWS - len(rows)))
        else:
            scenario, errors = _scenario_text(request)
            form["scenario"] = scenario
            if "scenario_file" in request.FILES:  # an upload says which source is meant
                form["source"] = WhatIfSource.SCENARIO.value
            if not errors:
                try:
                    run = whatif.create_run(
                        request.user,
                        source=form["source"],
                        window_start=form["window_start"],
                        window_end=form["window_end"],
                        scenario=scenario,
                        changes=rows,
                    )
                except PolicyInvalid as exc:
                    errors = exc.errors
                else:
                    return redirect("whatif-run", run.pk)
    elif request.GET.get("from", "").isdigit():
        earlier = WhatIfRun.objects.filter(pk=int(request.GET["from"])).first()
        if earlier is not None:  # run it again, maybe with another change
            form = {
                "source": earlier.source,
                "window_start": _local(earlier.window_start) or form["window_start"],
                "window_end": _local(earlier.window_end) or form["window_end"],
                "scenario": earlier.scenario,
            }
            rows = [
                {key: str(c.get(key, "")) for key in whatif.CHANGE_KEYS} for c in earlier.changes
            ] + _blank_rows(2)
    document, _ = whatif.today_document()
    queues = whatif.queue_summary(document)
    context = {
        "form": form,
        "rows": _rows_with_errors(rows, errors),
        "row_count": len(rows),
        "errors": errors,
        "field_errors": {e.field: e for e in errors},
        "fields": whatif.FIELDS,
        "queues": queues,
        "flavors": sorted({q["flavor"] for queue in queues for q in queue["quotas"]}),
        "resources": sorted({q["resource"] for queue in queues for q in queue["quotas"]}),
        "max_workloads": f"{whatif.MAX_WORKLOADS:,}",
        "default_runtime_hours": whatif.DEFAULT_RUNTIME_SECONDS / 3600,
        "recent": [
            {"run": run, "changes": whatif.describe_changes(run.changes)}
            for run in WhatIfRun.objects.select_related("created_by")[:RECENT_RUNS]
        ],
    }
    return page(request, "frontend/whatif.html", context, nav="whatif")


def parts_shown(run: WhatIfRun) -> list[dict[str, Any]]:
    """A run shared out among the workers: each part's cohort trees, size,
    and who replayed it for how long (or how far it has come)."""
    shown = []
    for part in run.parts.order_by("index").defer("replays", "result"):
        names = list(part.groups)
        trees = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        shown.append(
            {
                "number": part.index + 1,
                "trees": f"{len(names)} cohort tree{'s' if len(names) != 1 else ''} ({trees})",
                "workloads": part.workloads,
                "state": "ended" if part.error == ENDED_WITH_THE_RUN else part.state,
                "worker": part.worker or "—",
                "seconds": part.seconds,
                "percent": int(part.share * 100),
            }
        )
    return shown


@login_required
def whatif_run(request: HttpRequest, run_id: int) -> HttpResponse:
    _admin_only(request)
    run = get_object_or_404(WhatIfRun.objects.select_related("created_by"), pk=run_id)
    stale = (
        run.state == WhatIfState.RUNNING
        and run.heartbeat_at is not None
        and timezone.now() - run.heartbeat_at > timedelta(minutes=10)
    )
    context = {
        "run": run,
        "changes": whatif.describe_changes(run.changes),
        "stale": stale,
        "parts": parts_shown(run),
        "elapsed": (run.finished_at - run.started_at).total_seconds()
        if run.finished_at and run.started_at
        else None,
        # While it runs, the figures so far (the run writes them every few seconds).
        "compared": comparison(run)
        if run.result and run.state in (WhatIfState.RUNNING, WhatIfState.SUCCEEDED)
        else None,
    }
    # Polls itself until the run is done; the result then stays as it is.
    return page(
        request, "frontend/whatif_run.html", context, nav="whatif", live=not run.done, charts=True
    )
