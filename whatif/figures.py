"""The figures of a what-if: both policies replayed on one stream, per
ClusterQueue and in total, beside what the cluster recorded for the same
workloads and what the dashboard's hourly rollups hold for the window."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from cluster.models import BUCKET_FIELDS, WAIT_BUCKETS, EventType, WaitRollup, WorkloadEvent
from cluster.rollups import bucket_of, hour_of
from cluster.stats import quantile
from queues.engine.lockstep import replay_together
from queues.engine.metrics import summarize, wait_stats
from queues.engine.model import Policy
from queues.engine.replay_records import Frame
from queues.engine.simulator import SimulationResult, Simulator
from queues.engine.simulator import WorkloadRecord as Measured
from queues.quantity import format_canonical
from whatif.stream import Stream

# How often a run's figures so far are offered while it replays (wall time).
SO_FAR_EVERY_SECONDS = 2.0


def _clean(value: Any, digits: int = 3) -> Any:
    """JSON Postgres stores: no NaN or infinity, floats rounded."""
    if isinstance(value, float):
        return round(value, digits) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v, digits) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v, digits) for v in value]
    return value


def _figures(
    name: str, summary: dict[str, Any], result: SimulationResult, resource: str
) -> dict[str, Any]:
    queue = summary["cluster_queues"][name]
    figures = queue["resource_seconds"].get(resource, {})
    ratio = figures.get("usage_ratio")
    nominal = sum(v for (_, r), v in result.nominal.get(name, {}).items() if r == resource)
    return {
        "workloads": queue["workloads"],
        **_waits(queue["time_to_admission"]),
        "nominal": format_canonical(resource, nominal) if resource in _resources(result) else "",
        "usage_percent": ratio * 100 if ratio is not None else None,
        "used_hours": figures.get("used", 0.0) / 3600,
        "borrowed_hours": figures.get("borrowed", 0.0) / 3600,
        "lent_hours": figures.get("lent", 0.0) / 3600,
        "preemptions": sum(queue["preemptions"].values()),
        "preemptions_by_reason": dict(sorted(queue["preemptions"].items())),
        "gpu_hours_lost": queue["lost_gpu_seconds"] / 3600,
    }


def _waits(wait: dict[str, Any]) -> dict[str, Any]:
    """Wait figures as the result stores them: never admitted (by the window's
    end) count as waiting until then, and ``waits_at_least`` names the figures
    that are lower bounds because of them."""
    return {
        "never_admitted": wait["never_admitted"],
        "avg_wait": wait["avg"],
        "p50_wait": wait["p50"],
        "p95_wait": wait["p95"],
        "max_wait": wait["max"],
        "waits_at_least": [f"{key}_wait" for key in wait["at_least"]],
    }


def _recorded(records: list[Measured], end: float) -> dict[str, Any]:
    """What the cluster did with the window's workloads, on the same terms as
    the replay: per ClusterQueue and in total."""
    queues: dict[str, list[Measured]] = {}
    for record in records:
        queues.setdefault(record.cluster_queue, []).append(record)
    return {
        "queues": {
            name: {"workloads": len(members), **_waits(wait_stats(members, end))}
            for name, members in sorted(queues.items())
        },
        "total": {"workloads": len(records), **_waits(wait_stats(records, end))},
    }


def _dashboard_waits(hist: dict[str, list[int]]) -> dict[str, dict[str, Any]]:
    return {
        name: {
            "admissions": sum(buckets),
            "p50_wait": quantile(buckets, 0.5),
            "p95_wait": quantile(buckets, 0.95),
        }
        for name, buckets in sorted(hist.items())
    }


def _dashboard(first: datetime, last: datetime) -> dict[str, dict[str, Any]]:
    """What the dashboard's hourly wait rollups hold for [first, last): every
    admission (re-admissions too) by the hour it happened, with its wait since
    it was queued, as a histogram; p50 and p95 interpolated in it as the
    dashboard does. An hour ``last`` cuts short loses the admissions sync
    counted into it from ``last`` on, counted the way sync counts them."""
    hist: dict[str, list[int]] = {}
    rows = WaitRollup.objects.filter(hour__gte=first, hour__lt=last)
    for row in rows.only("cluster_queue", *BUCKET_FIELDS):
        buckets = hist.setdefault(row.cluster_queue, [0] * len(WAIT_BUCKETS))
        for index, count in enumerate(row.buckets):
            buckets[index] += count
    if last != hour_of(last):
        late = WorkloadEvent.objects.filter(
            type=EventType.ADMITTED, at__gte=last, at__lt=hour_of(last) + timedelta(hours=1)
        ).exclude(workload__cluster_queue="")
        admissions = list(
            late.values_list("workload_id", "workload__cluster_queue", "workload__created_at", "at")
        )
        requeued: dict[int, list[datetime]] = {}
        for workload_id, at in WorkloadEvent.objects.filter(
            type=EventType.REQUEUED, workload__in=late.values("workload_id")
        ).values_list("workload_id", "at"):
            requeued.setdefault(workload_id, []).append(at)
        for workload_id, queue, created, at in admissions:
            queued = max((t for t in requeued.get(workload_id, []) if t <= at), default=created)
            counted = hist.get(queue)
            index = bucket_of(max(0.0, (at - queued).total_seconds()))
            if counted is not None and counted[index] > 0:
                counted[index] -= 1
    return _dashboard_waits({name: b for name, b in hist.items() if sum(b)})


def _as_dashboard(result: SimulationResult, since: float, until: float) -> dict[str, Any]:
    """The replay's admissions in [since, until), counted the dashboard's way."""
    hist: dict[str, list[int]] = {}
    for queue, at, wait in result.admission_log:
        if since <= at < until:
            hist.setdefault(queue, [0] * len(WAIT_BUCKETS))[bucket_of(wait)] += 1
    return _dashboard_waits(hist)


def _resources(result: SimulationResult) -> set[str]:
    return {r for quotas in result.nominal.values() for (_, r) in quotas}


def _totals(
    summary: dict[str, Any], queues: dict[str, dict[str, Any]], result: SimulationResult
) -> dict[str, Any]:
    used = sum(q["used_hours"] for q in queues.values())
    nominal_hours = sum(
        queue["resource_seconds"].get(result.series["resource"], {}).get("nominal", 0.0) / 3600
        for queue in summary["cluster_queues"].values()
    )
    return {
        "workloads": summary["workloads"],
        **_waits(summary["time_to_admission"]),
        "usage_percent": 100 * used / nominal_hours if nominal_hours else None,
        "used_hours": used,
        "borrowed_hours": sum(q["borrowed_hours"] for q in queues.values()),
        "lent_hours": sum(q["lent_hours"] for q in queues.values()),
        "preemptions": sum(summary["preemptions"].values()),
        "preemptions_by_reason": summary["preemptions"],
        "gpu_hours_lost": summary["lost_gpu_seconds"] / 3600,
        "simulated_hours": summary["simulated_seconds"] / 3600,
        "admissions": summary["admissions"],
        "cycles": summary["cycles"],
        "livelocks": summary["livelocks"],
    }


def replay_options(stream: Stream) -> dict[str, Any]:
    """The simulator's options for a replay of the stream."""
    return {
        # A window is replayed from its start to its end, whenever work arrived.
        "start": 0.0 if stream.horizon is not None else None,
        "horizon": stream.horizon,
        "context": stream.context,
        "eviction_delay": stream.eviction_delay,
        "check_delays": stream.check_delays,
        "requeue_delay": stream.requeue_delay,
    }


def _simulators(today: Policy, proposal: Policy, stream: Stream) -> dict[str, Simulator]:
    """Each policy's replay of the stream, by label, not started."""
    return {
        label: Simulator(policy, stream.build(), **replay_options(stream))
        for label, policy in (("today", today), ("proposal", proposal))
    }


# Replays both policies elsewhere (``whatif.scaleout.replay_apart`` with the
# run and the parts given): (policies by label, the stream's workloads,
# simulator options, progress, so_far) -> (frame, results by label).
Apart = Callable[..., tuple[Frame, dict[str, SimulationResult]]]


def _dashboard_beside_replay(
    stream: Stream, today: SimulationResult
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The dashboard's figures for the hours the window covers, and today's
    replay counted the same way: they should agree. Empty without such hours."""
    if stream.hours is None or stream.start is None:
        return {}, {}
    first, last = stream.hours
    dashboard = _dashboard(first, last)
    return dashboard, _as_dashboard(
        today,
        (first - stream.start).total_seconds(),
        (last - stream.start).total_seconds(),
    )


def compare(
    today: Policy,
    proposal: Policy,
    stream: Stream,
    progress: Callable[[int], None] | None = None,
    so_far: Callable[[dict[str, Any]], None] | None = None,
    *,
    every: float = SO_FAR_EVERY_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    apart: Apart | None = None,
) -> dict[str, Any]:
    """Replay the stream under both policies; the figures per ClusterQueue and
    in total, today's beside the proposal's. The two replays advance together
    on the simulated clock: ``progress`` gets 0..99 percent, and ``so_far``,
    every ``every`` seconds or so, the figures of the part replayed so far (the
    same shape, with ``partial`` saying how far, and nothing recorded beside
    them). With ``apart`` the replays are shared out among workers; figures so
    far then come at the milestones every part has passed."""
    reported = [0]

    def report(share: float) -> None:
        percent = min(99, int(99 * share))
        if progress is not None and percent > reported[0]:
            reported[0] = percent
            progress(percent)

    def show(start: float, end: float, at: float, snapshots: dict[str, SimulationResult]) -> None:
        assert so_far is not None
        runs = {label: (r, summarize(r)) for label, r in snapshots.items()}
        figures = _assembled(runs, stream, final=False)
        figures["partial"] = _clean(
            {
                "simulated_seconds": at - start,
                # A window's end is known; a scenario's is the last arrival plus the longest run.
                "of_seconds": end - start,
                "workloads_so_far": runs["today"][1]["workloads"],
            }
        )
        so_far(figures)

    if apart is not None:
        _, results = apart(
            {"today": today, "proposal": proposal},
            stream.build,
            replay_options(stream),
            progress=report,
            so_far=(
                (lambda frame, at, runs: show(frame.start, frame.expected_end, at, runs))
                if so_far is not None
                else None
            ),
            every=every,
        )
    else:
        simulators = _simulators(today, proposal, stream)
        start = min(s.start for s in simulators.values())
        end = max(s.expected_end for s in simulators.values())

        def partial(at: float) -> None:
            show(start, end, at, {label: s.snapshot(at) for label, s in simulators.items()})

        results = replay_together(
            simulators,
            progress=report,
            so_far=partial if so_far is not None else None,
            every=every,
            clock=clock,
        )
    return _assembled({label: (r, summarize(r)) for label, r in results.items()}, stream)


def _assembled(
    runs: dict[str, tuple[SimulationResult, dict[str, Any]]], stream: Stream, final: bool = True
) -> dict[str, Any]:
    """The comparison of two replays' figures; with what the cluster recorded
    and the dashboard beside them once they are ``final``."""
    resource = runs["today"][0].series["resource"]
    names = sorted(
        set(runs["today"][1]["cluster_queues"]) | set(runs["proposal"][1]["cluster_queues"])
    )
    per_label: dict[str, dict[str, dict[str, Any]]] = {}
    for label, (result, summary) in runs.items():
        per_label[label] = {
            name: _figures(name, summary, result, resource)
            for name in names
            if name in summary["cluster_queues"]
        }
    recorded = (
        _recorded(stream.recorded, stream.horizon) if final and stream.horizon is not None else None
    )
    dashboard, as_dashboard = (
        _dashboard_beside_replay(stream, runs["today"][0]) if final else ({}, {})
    )
    hours = stream.hours if final else None
    queues = [
        {
            "cluster_queue": name,
            "today": per_label["today"].get(name),
            "proposal": per_label["proposal"].get(name),
            "recorded": (recorded["queues"].get(name) if recorded else None),
            "dashboard": (
                {"recorded": dashboard.get(name), "replayed": as_dashboard.get(name)}
                if hours is not None
                else None
            ),
        }
        for name in names
    ]
    totals = {
        label: _totals(summary, per_label[label], result)
        for label, (result, summary) in runs.items()
    }
    return _clean(
        {
            "resource": resource,
            "workloads": stream.count,
            "queues": queues,
            "totals": totals,
            "recorded": recorded["total"] if recorded else None,
            "dashboard_hours": [moment.isoformat() for moment in hours] if hours else None,
            "runtime_sources": stream.runtime_sources,
            "skipped": stream.skipped,
            "notes": stream.notes,
        }
    )
