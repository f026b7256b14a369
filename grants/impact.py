"""What a grant does to the others, for the approver: whose lendable capacity
shrinks, and which running workloads a loan would leave over their lender's
quota (and so open to preemption when the borrower claims it).

Read from Postgres and the engine's view of the cluster (``cluster.state``),
never from the cluster itself. A nominal or borrowing grant takes nothing that
is running: Kueue lends only unused quota, and a lender reclaims it by
preempting the borrower. A loan lowers the lender's nominal quota; what the
lender runs above its new quota is then borrowed, and the borrower reclaims
it by preemption, lowest priority first, most recently admitted first (Kueue's
order of candidates)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cluster.models import WorkloadRecord, WorkloadState
from cluster.state import ClusterState, cluster_state
from grants.models import GrantKind
from grants.policy import BORROWING, LENDING, NOMINAL, current
from queues.models import ClusterQueue
from queues.quantity import format_canonical
from whatif.models import WhatIfRun, WhatIfState

HOLDING = (WorkloadState.QUOTA_RESERVED, WorkloadState.ADMITTED, WorkloadState.EVICTED)


def _usage(state: ClusterState, flavor: str, resource: str) -> dict[str, int]:
    """Per ClusterQueue, what its workloads hold of ``flavor`` × ``resource``."""
    used: dict[str, int] = {}
    for workload in state.scheduler.workloads.values():
        amount = workload.usage().get((flavor, resource), 0)
        if amount:
            used[workload.cluster_queue] = used.get(workload.cluster_queue, 0) + amount
    return used


def _lendable(nominal: int, lending_limit: int | None, used: int) -> int:
    """Unused quota the queue lends: its nominal (or lending limit) less use."""
    cap = nominal if lending_limit is None else min(nominal, lending_limit)
    return max(0, min(cap, nominal - used))


def _row(
    queue: ClusterQueue, flavor: str, resource: str, used: int, *, nominal_change: int = 0
) -> dict[str, Any]:
    nominal = current(queue, flavor, resource, NOMINAL) or 0
    lending = current(queue, flavor, resource, LENDING)
    after_nominal = max(0, nominal + nominal_change)
    after_lending = None if lending is None else min(lending, after_nominal)
    return {
        "cluster_queue": queue.name,
        "team": queue.team.slug if queue.team else "",
        "nominal": format_canonical(resource, nominal),
        "nominal_after": format_canonical(resource, after_nominal),
        "in_use": format_canonical(resource, used),
        "lendable": format_canonical(resource, _lendable(nominal, lending, used)),
        "lendable_after": format_canonical(resource, _lendable(after_nominal, after_lending, used)),
    }


def _victims(
    state: ClusterState, lender: str, flavor: str, resource: str, excess: int, now: datetime
) -> list[dict[str, Any]]:
    """The lender's workloads freeing ``excess`` of the resource, in Kueue's
    order of preemption candidates."""
    holding = [
        w
        for w in state.scheduler.workloads.values()
        if w.cluster_queue == lender and w.usage().get((flavor, resource), 0)
    ]
    holding.sort(key=lambda w: (w.priority, -(w.admitted_at or 0.0), w.key))
    rows: list[dict[str, Any]] = []
    freed = 0
    for workload in holding:
        if freed >= excess:
            break
        amount = workload.usage()[(flavor, resource)]
        freed += amount
        record = (
            WorkloadRecord.objects.select_related("team")
            .filter(namespace=workload.namespace, name=workload.name, state__in=HOLDING)
            .order_by("-created_at")
            .first()
        )
        ran = now.timestamp() - workload.admitted_at if workload.admitted_at else 0.0
        rows.append(
            {
                "workload": workload.key,
                "team": record.team.slug if record is not None and record.team else "",
                "priority": workload.priority,
                "amount": format_canonical(resource, amount),
                "running_seconds": max(0, round(ran)),
            }
        )
    return rows


def _unlent_summary(name: str, kind: str, shown: str, peers: list[dict[str, Any]]) -> str:
    """A nominal or borrowing grant in words: it takes nothing running."""
    if kind == GrantKind.NOMINAL:
        text = (
            f"{name}'s nominal quota rises by {shown}, and its cohort's pool with it: "
            f"{name} may use it before anyone borrows it. This is Kueue quota, not nodes: "
            "if the nodes are not there, workloads admitted on it wait for them"
        )
    else:
        text = f"{name} may borrow up to {shown} more of its cohort's unused quota"
    if peers:
        text += (
            "; its cohort peers lend only what they do not use and reclaim it by "
            "preempting the borrower, so nothing running of theirs is preempted"
        )
    return text


def grant_impact(
    *,
    cluster_queue: ClusterQueue,
    kind: str,
    flavor: str,
    resource: str,
    amount: int,
    lender: ClusterQueue | None,
    now: datetime,
    state: ClusterState | None = None,
) -> dict[str, Any]:
    """The impact stored on a grant (JSON): ``shrinks`` (queues whose lendable
    capacity goes down), ``preempts`` (workloads a loan would leave open to
    preemption), and a one-line ``summary``."""
    view = state if state is not None else cluster_state(now)
    used = _usage(view, flavor, resource)
    shown = format_canonical(resource, amount)
    preempts: list[dict[str, Any]] = []
    if kind == GrantKind.LOAN and lender is not None:
        shrinks = [_row(lender, flavor, resource, used.get(lender.name, 0), nominal_change=-amount)]
        nominal = current(lender, flavor, resource, NOMINAL) or 0
        excess = used.get(lender.name, 0) - max(0, nominal - amount)
        if excess > 0:
            preempts = _victims(view, lender.name, flavor, resource, excess, now)
        summary = f"{lender.name} lends {shown} {flavor} {resource} of its nominal quota"
    else:
        peers = (
            ClusterQueue.objects.filter(
                cohort_id=cluster_queue.cohort_id, quotas__flavor__name=flavor
            )
            .exclude(pk=cluster_queue.pk)
            .select_related("team")
            .distinct()
            if cluster_queue.cohort_id is not None
            else ClusterQueue.objects.none()
        )
        shrinks = [
            _row(queue, flavor, resource, used.get(queue.name, 0))
            for queue in peers
            if current(queue, flavor, resource, NOMINAL) is not None
        ]
        summary = _unlent_summary(cluster_queue.name, kind, f"{shown} {flavor} {resource}", shrinks)
    if preempts:
        summary += (
            f"; {len(preempts)} running workload(s) of {lender.name if lender else ''} "
            "would be over its quota and preempted when the borrower claims it"
        )
    return {
        "computed_at": now.isoformat(),
        "shrinks": shrinks,
        "preempts": preempts,
        "summary": summary,
        "field": BORROWING if kind == GrantKind.BORROWING else NOMINAL,
    }


def whatif_waits(run: WhatIfRun | None, granted: str) -> dict[str, Any] | None:
    """What the grant's what-if run says about waits: per ClusterQueue, the
    p95 and average wait (seconds) and preemptions today and with the grant,
    the granted queue marked. None without a run; the run's state (and error)
    while it has no figures."""
    if run is None:
        return None
    answer: dict[str, Any] = {"run": run.pk, "state": run.state, "error": run.error, "queues": []}
    if run.state != WhatIfState.SUCCEEDED:
        return answer
    for queue in (run.result or {}).get("queues", []):
        today, proposal = queue.get("today") or {}, queue.get("proposal") or {}
        answer["queues"].append(
            {
                "cluster_queue": queue.get("cluster_queue"),
                "granted": queue.get("cluster_queue") == granted,
                "p95_wait_today": today.get("p95_wait"),
                "p95_wait_with_grant": proposal.get("p95_wait"),
                "avg_wait_today": today.get("avg_wait"),
                "avg_wait_with_grant": proposal.get("avg_wait"),
                "preemptions_today": today.get("preemptions"),
                "preemptions_with_grant": proposal.get("preemptions"),
            }
        )
    return answer
