"""Fair shares from what sync recorded: per team, what it received against
what it deserved while it had work waiting, over 1 h, 24 h and 7 d
(``cluster.fairness_shares`` holds the arithmetic; docs/fairness.md the
choices).

- The instants are the queue snapshots sync took (every BERTH_SYNC_INTERVAL
  seconds, thinned as they age by ``cluster.retention``); each stands for the
  time until the next one, at most an hour (a longer gap is sync not running,
  and counts as one hour).
- At each instant a ClusterQueue holds its snapshot's GPU usage (every
  flavor), has its snapshot's nominal quota, and waits for the GPUs of the
  workloads pending in it then, from the workload events: pending from their
  creation or requeue until quota is reserved or they end.
- A team is the ClusterQueues it owns (a shared queue is nobody's), with
  their weights, lending limits and cohort trees from the current policy; fair
  sharing counts when Kueue's configuration turns it on.

``refresh`` writes each team's figures to ``TeamFairness``, which the pages,
``/metrics`` and the alerts read (a 7-day window is too much work for a
scrape).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from cluster.fairness_shares import (
    WINDOW_SECONDS,
    WINDOWS,
    Instant,
    QueueSample,
    Tally,
    parse_fraction,
    tally,
)
from cluster.models import EventType, QueueSnapshot, WorkloadEvent, WorkloadRecord, WorkloadState
from queues.choices import ChangeAction, PolicyKind
from queues.errors import PolicyInvalid
from queues.models import ClusterQueue, Cohort, KueueConfiguration, Quota, Team, TeamFairness
from queues.services.common import record_change

GPU = "nvidia.com/gpu"
# The longest stretch one snapshot stands for (the hourly tier of retention).
MAX_GAP = 3600.0
LONGEST = max(WINDOW_SECONDS.values())
# The window whose starvation the notices and the Overview follow.
ALERT_WINDOW = "1h"

# A pending workload stops waiting when quota is reserved for it or it ends;
# an eviction or requeue puts it back in line.
_STOPS = {
    EventType.QUOTA_RESERVED,
    EventType.ADMITTED,
    EventType.FINISHED,
    EventType.FAILED,
    EventType.DEACTIVATED,
    EventType.DELETED,
}
_STARTS = {EventType.EVICTED, EventType.PREEMPTED, EventType.REQUEUED}
_ENDED = (
    WorkloadState.FINISHED,
    WorkloadState.FAILED,
    WorkloadState.DEACTIVATED,
    WorkloadState.DELETED,
)


@dataclass(frozen=True)
class QueuePolicy:
    team: str
    tree: str
    weight: float
    lending_limit: int | None


def _policy() -> tuple[dict[str, QueuePolicy], dict[str, int]]:
    """Each ClusterQueue's team, cohort tree root, weight and GPU lending
    limit; and each tree's own GPU quota (quota held by its cohorts)."""
    parents = dict(Cohort.objects.values_list("name", "parent__name"))

    def root(name: str | None) -> str:
        seen: set[str] = set()
        while name and parents.get(name) and name not in seen:
            seen.add(name)
            name = parents[name]
        return name or ""

    limits: dict[str, list[int | None]] = defaultdict(list)
    for queue, limit in Quota.objects.filter(cluster_queue__isnull=False, resource=GPU).values_list(
        "cluster_queue__name", "lending_limit"
    ):
        limits[queue].append(limit)
    queues = {}
    for name, team, cohort, weight in ClusterQueue.objects.values_list(
        "name", "team__slug", "cohort__name", "fair_sharing_weight"
    ):
        own = limits.get(name, [])
        queues[name] = QueuePolicy(
            team=team or "",
            tree=root(cohort),
            weight=float(weight),
            # Limited only when every GPU flavor of it is.
            lending_limit=sum(x for x in own if x is not None)
            if own and all(x is not None for x in own)
            else None,
        )
    cohort_quota: dict[str, int] = defaultdict(int)
    for cohort, nominal in Quota.objects.filter(cohort__isnull=False, resource=GPU).values_list(
        "cohort__name", "nominal_quota"
    ):
        cohort_quota[root(cohort)] += int(nominal)
    return queues, dict(cohort_quota)


def fair_sharing_on() -> bool:
    return bool(
        KueueConfiguration.objects.filter(pk=1)
        .values_list("fair_sharing_enable", flat=True)
        .first()
    )


class _Waiting:
    """GPUs pending per ClusterQueue over time, as steps: at each change, the
    total from then on."""

    def __init__(self, changes: dict[str, list[tuple[float, int]]]) -> None:
        self.times: dict[str, list[float]] = {}
        self.totals: dict[str, list[int]] = {}
        for queue, deltas in changes.items():
            deltas.sort()
            times: list[float] = []
            totals: list[int] = []
            running = 0
            for at, delta in deltas:
                running += delta
                if times and times[-1] == at:
                    totals[-1] = running
                else:
                    times.append(at)
                    totals.append(running)
            self.times[queue], self.totals[queue] = times, totals

    def at(self, queue: str, moment: float) -> int:
        times = self.times.get(queue)
        if not times:
            return 0
        index = bisect.bisect_right(times, moment) - 1
        return max(0, self.totals[queue][index]) if index >= 0 else 0


def _waiting(since: datetime, now: datetime, queues: set[str]) -> _Waiting:
    """When each workload of these queues waited, from its events."""
    records = (
        WorkloadRecord.objects.filter(cluster_queue__in=queues, created_at__lt=now)
        .exclude(state__in=_ENDED, synced_at__lt=since)
        .values_list("id", "cluster_queue", "requested", "created_at", "state", "synced_at")
    )
    workloads: dict[int, tuple[str, int, datetime, str, datetime]] = {}
    for pk, queue, requested, created, state, synced in records:
        gpus = int((requested or {}).get(GPU, 0))
        if gpus > 0:
            workloads[pk] = (queue, gpus, created, state, synced)
    events: dict[int, list[tuple[datetime, str]]] = defaultdict(list)
    if workloads:
        for pk, kind, at in (
            WorkloadEvent.objects.filter(
                workload_id__in=list(workloads), type__in=sorted(_STOPS | _STARTS)
            )
            .order_by("at", "id")
            .values_list("workload_id", "type", "at")
        ):
            events[pk].append((at, kind))
    changes: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for pk, (queue, gpus, created, state, synced) in workloads.items():
        waiting_since: datetime | None = created
        for at, kind in events.get(pk, []):
            if kind in _STOPS and waiting_since is not None:
                changes[queue] += [(waiting_since.timestamp(), gpus), (at.timestamp(), -gpus)]
                waiting_since = None
            elif kind in _STARTS and waiting_since is None:
                waiting_since = at
            if kind in (EventType.FINISHED, EventType.FAILED, EventType.DELETED):
                break
        if waiting_since is not None:
            # Still pending, or its end was not recorded: until now or its last sync.
            end = now if state == WorkloadState.PENDING else max(synced, waiting_since)
            changes[queue] += [(waiting_since.timestamp(), gpus), (end.timestamp(), -gpus)]
    return _Waiting(changes)


def _instants(
    since: datetime, now: datetime, policy: dict[str, QueuePolicy], waiting: _Waiting
) -> list[Instant]:
    # Flavors added up by the database: one row per queue and instant.
    rows = (
        QueueSnapshot.objects.filter(
            resource=GPU, at__gte=since, at__lte=now, cluster_queue__in=list(policy)
        )
        .values("at", "cluster_queue")
        .annotate(nominal=Sum("nominal"), held=Sum("usage"))
        .order_by()
        .values_list("at", "cluster_queue", "nominal", "held")
    )
    by_instant: dict[datetime, dict[str, list[int]]] = {}
    for at, queue, nominal, usage in rows:
        by_instant.setdefault(at, {})[queue] = [int(nominal or 0), int(usage or 0)]
    moments = sorted(by_instant)
    instants = []
    for index, at in enumerate(moments):
        following = moments[index + 1] if index + 1 < len(moments) else now
        moment = at.timestamp()
        instant = Instant(moment, min(MAX_GAP, (following - at).total_seconds()))
        for queue, (nominal, held) in sorted(by_instant[at].items()):
            rules = policy[queue]
            instant.samples.append(
                QueueSample(
                    queue=queue,
                    team=rules.team,
                    tree=rules.tree,
                    weight=rules.weight,
                    nominal=nominal,
                    held=held,
                    waiting=waiting.at(queue, moment),
                    lending_limit=rules.lending_limit,
                )
            )
        instants.append(instant)
    return instants


def evaluate(now: datetime | None = None) -> dict[str, dict[str, Tally]]:
    """{team slug: {window: Tally}} for every team owning a ClusterQueue."""
    now = now or timezone.now()
    since = now - timedelta(seconds=LONGEST + MAX_GAP)
    policy, cohort_quota = _policy()
    waiting = _waiting(since, now, set(policy))
    figures = tally(
        _instants(since, now, policy, waiting),
        now=now.timestamp(),
        fair_sharing=fair_sharing_on(),
        cohort_quota=cohort_quota,
    )
    for rules in policy.values():
        if rules.team:
            figures.setdefault(rules.team, {label: Tally() for label, _ in WINDOWS})
    return figures


def as_figures(tallies: dict[str, Tally]) -> dict[str, dict[str, Any]]:
    """What ``TeamFairness.figures`` keeps: GPU-hours, seconds and the ratio."""
    return {
        label: {
            "received": round(tallies[label].received / 3600, 3),
            "deserved": round(tallies[label].deserved / 3600, 3),
            "waiting": round(tallies[label].waiting),
            "ratio": None if (ratio := tallies[label].ratio(seconds)) is None else round(ratio, 4),
        }
        for label, seconds in WINDOWS
    }


def waiting_gpus_now() -> dict[str, int]:
    """GPUs each team's pending workloads ask for now, in the queues it owns."""
    owners = dict(ClusterQueue.objects.filter(team__isnull=False).values_list("name", "team__slug"))
    waiting: dict[str, int] = defaultdict(int)
    for queue, requested in WorkloadRecord.objects.filter(
        state=WorkloadState.PENDING, cluster_queue__in=list(owners)
    ).values_list("cluster_queue", "requested"):
        waiting[owners[queue]] += int((requested or {}).get(GPU, 0))
    return dict(waiting)


def refresh(now: datetime | None = None) -> list[TeamFairness]:
    """Evaluate every team owning a ClusterQueue and keep its figures; a team
    evaluated before that owns none now keeps none. Returns the rows written."""
    now = now or timezone.now()
    figures = evaluate(now)
    waiting = waiting_gpus_now()
    teams = dict(Team.objects.filter(slug__in=list(figures)).values_list("slug", "pk"))
    rows = []
    with transaction.atomic():
        for slug, tallies in sorted(figures.items()):
            if slug not in teams:
                continue
            row, _ = TeamFairness.objects.update_or_create(
                team_id=teams[slug],
                defaults={
                    "figures": as_figures(tallies),
                    "waiting_gpus": waiting.get(slug, 0),
                    "evaluated_at": now,
                },
            )
            rows.append(row)
        # A team that no longer owns a queue has no figures (and cannot starve).
        gone = TeamFairness.objects.exclude(team_id__in=list(teams.values())).filter(
            evaluated_at__isnull=False
        )
        gone.update(figures={}, waiting_gpus=0, evaluated_at=now)
        rows += list(gone.select_related("team"))
    return rows


# ------------------------------------------------------------------ thresholds


def default_starved_below() -> Decimal:
    return Decimal(str(settings.BERTH_FAIR_SHARE_STARVED_BELOW))


def starved_below(row: TeamFairness | None) -> Decimal:
    """The team's own threshold, else the installation's."""
    if row is not None and row.starved_below is not None:
        return Decimal(row.starved_below)
    return default_starved_below()


def is_starved(row: TeamFairness, window: str = ALERT_WINDOW) -> bool:
    """Below its threshold over ``window`` while work of it waits now."""
    ratio = (row.figures or {}).get(window, {}).get("ratio")
    return ratio is not None and row.waiting_gpus > 0 and Decimal(str(ratio)) < starved_below(row)


def set_starved_below(team: Team, value: str | None, actor: Any = None) -> TeamFairness:
    """Give ``team`` its own threshold (text such as "0.3"), or take it away
    (None or ""), so the installation's applies; a change is in the team's
    policy history, by ``actor``. A bad value changes nothing and names the
    field and the rule."""
    fraction: Decimal | None = None
    if value is not None and str(value).strip() != "":
        fraction, problem = parse_fraction(value)
        if fraction is None:
            raise PolicyInvalid.single("starved_below", "fraction", problem)
    with transaction.atomic():
        row, _ = TeamFairness.objects.select_for_update().get_or_create(team=team)
        if row.starved_below != fraction:
            before = row.starved_below
            TeamFairness.objects.filter(pk=row.pk).update(starved_below=fraction)
            row.refresh_from_db()
            record_change(
                actor=actor,
                kind=PolicyKind.TEAM,
                object_name=team.slug,
                action=ChangeAction.UPDATED,
                before={"fair_share_starved_below": _threshold_text(before)},
                after={"fair_share_starved_below": _threshold_text(row.starved_below)},
            )
    return row


def _threshold_text(value: Decimal | None) -> str:
    return str(value.normalize()) if value is not None else "the installation's default"
