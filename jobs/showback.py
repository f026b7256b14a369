"""Showback: what each team used of the GPUs in a month and what it cost,
from the monthly rollups sync keeps (``cluster.allocation``), never from the
event log per request.

Per team, workload type, flavor (any of them, in the order asked):

- **allocated**: GPU-hours Kueue held for its workloads, from each quota
  reservation to the eviction or end (GPUs × time);
- **busy**: GPU-hours its GPUs were really busy (DCGM, or the simulated
  cluster), over the part of the allocation that was measured;
- **lost**: GPU-hours of work preemption threw away, since the last
  checkpoint (the job's checkpoint interval; all of the run without one);
- **cost** of the allocated and of the lost hours, each hour at the flavor's
  price per GPU-hour in force then (history), in ``BERTH_CURRENCY``;
- **borrowed and lent** GPU-hours, by the queues' teams, when the grouping
  has no workload type (borrowing is a queue's, not a workload's); and from
  and to whom (other teams; "" for shared queues), the five largest, when the
  report covers at most ten teams.

The workload type is Berth's ``workload.ai/type`` label, which a job carries
by its queue's class (``jobs.manifest_spec.WORKLOAD_TYPES``): the rollups
keep the class of the ClusterQueue that admitted each workload, so workloads
Berth did not submit count under the type their queue would give them.
"""

from __future__ import annotations

import csv
import heapq
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import IO, Any

from django.conf import settings
from django.db.models import Case, IntegerField, Max, OuterRef, Q, Subquery, Value, When

from accounts.roles import is_platform_admin
from cluster.models import (
    PreemptionLoss,
    QueueSnapshot,
    TeamBorrowingRollup,
    TeamBorrowingTotal,
    UsageRollup,
)
from jobs.manifest_spec import DEFAULT_WORKLOAD_TYPE, WORKLOAD_TYPES
from jobs.models import JobRequest
from queues import prices
from queues.access import team_ids_of
from queues.errors import FieldError
from queues.models import Team

DIMENSIONS = ("team", "type", "flavor")
# Counterparts listed per row, largest first (the borrowed and lent totals are
# whole), when the report covers at most COUNTERPART_TEAMS teams.
TOP_COUNTERPARTS = 5
COUNTERPART_TEAMS = 10
DEFAULT_GROUP_BY = ("team",)
HOUR = Decimal(3600)
# A cell starting with one of these is a formula to a spreadsheet: quoted.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def workload_type(queue_class: str) -> str:
    """The ``workload.ai/type`` a job in a queue of this class carries."""
    return WORKLOAD_TYPES.get(queue_class, DEFAULT_WORKLOAD_TYPE)


# --------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class Month:
    year: int
    month: int

    @property
    def label(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"

    @property
    def first_day(self) -> date:
        return date(self.year, self.month, 1)

    @property
    def next_first_day(self) -> date:
        return date(self.year + self.month // 12, self.month % 12 + 1, 1)

    @property
    def start(self) -> datetime:
        return datetime(self.year, self.month, 1, tzinfo=UTC)

    @property
    def end(self) -> datetime:
        following = self.next_first_day
        return datetime(following.year, following.month, 1, tzinfo=UTC)

    @classmethod
    def of(cls, moment: datetime) -> Month:
        moment = moment.astimezone(UTC)
        return cls(moment.year, moment.month)


def parse_month(value: str | None, now: datetime) -> tuple[Month | None, list[FieldError]]:
    """``YYYY-MM`` (a UTC calendar month); absent: the current month."""
    if value is None:
        return Month.of(now), []
    year, dash, month = value.partition("-")
    if not (
        dash
        and len(year) == 4
        and len(month) == 2
        and year.isascii()
        and year.isdigit()
        and month.isascii()
        and month.isdigit()
    ):
        return None, [
            FieldError(
                "month",
                "month-format",
                f"{value!r} is not a month: write YYYY-MM, e.g. {Month.of(now).label}",
            )
        ]
    if not 1 <= int(month) <= 12 or int(year) < 1970:
        return None, [
            FieldError(
                "month",
                "month-range",
                f"{value!r} is not a calendar month: the month is 01 to 12, the year 1970 or later",
            )
        ]
    return Month(int(year), int(month)), []


def parse_group_by(value: str | None) -> tuple[tuple[str, ...], list[FieldError]]:
    """A comma-separated list of ``team``, ``type``, ``flavor``, each once;
    absent: by team."""
    if value is None:
        return DEFAULT_GROUP_BY, []
    names = [part.strip() for part in value.split(",")]
    allowed = ", ".join(DIMENSIONS)
    if not value.strip() or any(not name for name in names):
        return (), [
            FieldError(
                "group_by",
                "empty-dimension",
                f"{value!r} names an empty dimension: list one or more of {allowed}, "
                "separated by commas, e.g. team,type",
            )
        ]
    unknown = [name for name in names if name not in DIMENSIONS]
    if unknown:
        return (), [
            FieldError(
                "group_by",
                "unknown-dimension",
                f"{', '.join(repr(n) for n in unknown)} is not a dimension: use any of "
                f"{allowed}, e.g. team,type",
            )
        ]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        return (), [
            FieldError(
                "group_by",
                "repeated-dimension",
                f"{', '.join(twice)} is listed twice: name each dimension once",
            )
        ]
    return tuple(names), []


# --------------------------------------------------------------------------- the report


@dataclass
class Figures:
    """One row's (or the totals') GPU-seconds and money, unrounded."""

    allocated: float = 0.0
    busy: float = 0.0
    measured: float = 0.0
    lost: float = 0.0
    unpriced: float = 0.0
    cost: Decimal = Decimal(0)
    lost_cost: Decimal = Decimal(0)
    priced: bool = False
    lost_priced: bool = False
    # None when the grouping has a workload type (borrowing is a queue's): the
    # GPU-seconds borrowed and lent, and the largest counterparts of each.
    borrowed: float | None = None
    lent: float | None = None
    borrowed_from: dict[str, float] | None = None
    lent_to: dict[str, float] | None = None

    def start_borrowing(self, listed: bool) -> None:
        if self.borrowed is None:
            self.borrowed, self.lent = 0.0, 0.0
            self.borrowed_from, self.lent_to = ({}, {}) if listed else (None, None)

    def add_usage(self, price: str, allocated: float, busy: float, measured: float) -> None:
        self.allocated += allocated
        self.busy += busy
        self.measured += measured
        if price:
            self.cost += Decimal(price) * Decimal(repr(allocated)) / HOUR
            self.priced = True
        else:
            self.unpriced += allocated

    def add_loss(self, price: str, lost: float) -> None:
        self.lost += lost
        if price:
            self.lost_cost += Decimal(price) * Decimal(repr(lost)) / HOUR
            self.lost_priced = True

    def add(self, other: Figures) -> None:
        self.allocated += other.allocated
        self.busy += other.busy
        self.measured += other.measured
        self.lost += other.lost
        self.unpriced += other.unpriced
        self.cost += other.cost
        self.lost_cost += other.lost_cost
        self.priced |= other.priced
        self.lost_priced |= other.lost_priced


@dataclass
class UsageRow:
    keys: dict[str, str]
    figures: Figures


@dataclass
class UsageReport:
    month: Month
    group_by: tuple[str, ...]
    currency: str
    rows: list[UsageRow]
    totals: Figures
    as_of: datetime | None
    busy_source: str
    # The teams whose rows the viewer sees (None: every team, an admin).
    teams: list[str] | None = field(default=None)


def visible_team_slugs(user: Any) -> set[str] | None:
    """The team slugs whose figures ``user`` sees; None for every team (an
    admin, who also sees namespaces no team owns, as team "")."""
    if is_platform_admin(user):
        return None
    ids = team_ids_of(user)
    return set(Team.objects.filter(pk__in=ids).values_list("slug", flat=True))


def _lost_seconds(seconds: float, interval: int | None) -> float:
    """Work lost to one preemption: since the last checkpoint when the job
    checkpoints every ``interval`` seconds (as the job's own figures count it,
    jobs.follow), else all of the run."""
    return seconds % interval if interval else seconds


def usage_report(
    user: Any, month: Month, group_by: tuple[str, ...], *, teams: Iterable[str] | None = None
) -> UsageReport:
    """The month's figures ``user`` may see (their teams'; every team for an
    admin), grouped by ``group_by``; ``teams`` narrows to those."""
    visible = visible_team_slugs(user)
    wanted = None if teams is None else set(teams)
    if visible is not None and wanted is not None:
        wanted &= visible
    elif visible is not None:
        wanted = visible
    positions = [DIMENSIONS.index(name) for name in group_by]
    keys: dict[tuple[str, str, str], tuple[str, ...]] = {}

    def key_of(team: str, queue_class: str, flavor: str) -> tuple[str, ...]:
        found = keys.get((team, queue_class, flavor))
        if found is None:
            values = (team, workload_type(queue_class), flavor)
            found = keys[(team, queue_class, flavor)] = tuple(values[i] for i in positions)
        return found

    groups: dict[tuple[str, ...], Figures] = defaultdict(Figures)
    usage = UsageRollup.objects.filter(month=month.first_day)
    losses = PreemptionLoss.objects.filter(at__gte=month.start, at__lt=month.end)
    if wanted is not None:
        usage = usage.filter(team__in=wanted)
        losses = losses.filter(team__in=wanted)
    busy_source = ""
    # One row per team, queue class, flavor and price in the month: nothing to add up.
    for (
        team,
        queue_class,
        flavor,
        price,
        allocated,
        busy,
        measured,
        source,
    ) in usage.order_by().values_list(
        "team",
        "queue_class",
        "flavor",
        "price",
        "gpu_seconds",
        "busy_gpu_seconds",
        "measured_gpu_seconds",
        "busy_source",
    ):
        groups[key_of(team, queue_class, flavor)].add_usage(
            price, float(allocated or 0), float(busy or 0), float(measured or 0)
        )
        busy_source = busy_source or source or ""
    for team, queue_class, flavor, price, gpus, seconds, interval in _losses_with_checkpoints(
        losses
    ):
        lost = _lost_seconds(float(seconds), interval) * int(gpus)
        groups[key_of(team, queue_class, flavor)].add_loss(price, lost)
    if "type" not in group_by:
        _add_borrowing(groups, group_by, month, wanted)
    rows = [
        UsageRow(dict(zip(group_by, key, strict=True)), figures)
        for key, figures in sorted(groups.items())
    ]
    totals = Figures()
    for row in rows:
        totals.add(row.figures)
    if "type" not in group_by:
        # The whole of it; who with is each row's (the viewer's teams lend to each other).
        totals.borrowed = sum(row.figures.borrowed or 0.0 for row in rows)
        totals.lent = sum(row.figures.lent or 0.0 for row in rows)
    as_of = QueueSnapshot.objects.aggregate(at=Max("at"))["at"]
    return UsageReport(
        month=month,
        group_by=group_by,
        currency=settings.BERTH_CURRENCY,
        rows=rows,
        totals=totals,
        as_of=as_of,
        busy_source=busy_source,
        teams=None if visible is None else sorted(visible),
    )


def _losses_with_checkpoints(
    losses: Any,
) -> Iterable[tuple[str, str, str, str, int, float, int | None]]:
    """Each preemption with the checkpoint interval of the Berth job that ran
    it: the job of that namespace, kind and name submitted last before it (a
    name is free again only once its job ended), when it kept checkpoints."""
    job = (
        JobRequest.objects.filter(
            namespace=OuterRef("namespace"),
            kind=OuterRef("job_kind"),
            name=OuterRef("job_name"),
            submitted_at__lte=OuterRef("at"),
        )
        .order_by("-submitted_at", "-id")
        .annotate(
            interval=Case(
                When(checkpoint_uri="", then=Value(None)),
                default="checkpoint_interval_seconds",
                output_field=IntegerField(),
            )
        )
        .values("interval")[:1]
    )
    return losses.annotate(interval=Subquery(job, output_field=IntegerField())).values_list(
        "team", "queue_class", "flavor", "price", "gpus", "seconds", "interval"
    )


def _add_borrowing(
    groups: dict[tuple[str, ...], Figures],
    group_by: tuple[str, ...],
    month: Month,
    wanted: set[str] | None,
) -> None:
    """Borrowed and lent, onto each row (a row's teams are its own when
    grouped by team, else all the viewer's; its flavor, if grouped by it),
    from the teams' monthly totals. From and to whom, the largest
    ``TOP_COUNTERPARTS``, when the report covers at most ``COUNTERPART_TEAMS``
    teams: a month of a large cohort has tens of thousands of small pairs
    (every queue with unused quota lends a share), too many to rank for every
    team in one answer; ``team=`` asks for one."""
    by_team, by_flavor = "team" in group_by, "flavor" in group_by
    team_first = group_by[0] == "team"

    def key(team: str, flavor: str) -> tuple[str, ...]:
        if by_team and by_flavor:
            return (team, flavor) if team_first else (flavor, team)
        return (team,) if by_team else (flavor,)

    listed = wanted is not None and len(wanted) <= COUNTERPART_TEAMS
    totals = TeamBorrowingTotal.objects.filter(month=month.first_day)
    if wanted is not None:
        totals = totals.filter(team__in=wanted)
    for team, flavor, borrowed, lent in totals.values_list(
        "team", "flavor", "borrowed_gpu_seconds", "lent_gpu_seconds"
    ):
        figures = groups[key(team, flavor)]
        figures.start_borrowing(listed)
        figures.borrowed = (figures.borrowed or 0.0) + borrowed
        figures.lent = (figures.lent or 0.0) + lent
    for figures in groups.values():
        figures.start_borrowing(listed)
    if not listed or wanted is None:
        return
    books: tuple[dict[tuple[str, ...], dict[str, float]], ...] = (
        defaultdict(lambda: defaultdict(float)),
        defaultdict(lambda: defaultdict(float)),
    )
    borrowed_from, lent_to = books
    pairs = TeamBorrowingRollup.objects.filter(month=month.first_day).filter(
        Q(borrower__in=wanted) | Q(lender__in=wanted)
    )
    for borrower, lender, flavor, seconds in pairs.values_list(
        "borrower", "lender", "flavor", "gpu_seconds"
    ):
        if borrower in wanted:
            borrowed_from[key(borrower, flavor)][lender] += seconds
        if lender in wanted:
            lent_to[key(lender, flavor)][borrower] += seconds
    for outgoing, book in zip((True, False), books, strict=True):
        for row_key, counterparts in book.items():
            top = dict(
                heapq.nsmallest(
                    TOP_COUNTERPARTS, counterparts.items(), key=lambda item: (-item[1], item[0])
                )
            )
            figures = groups[row_key]
            figures.start_borrowing(listed)
            if outgoing:
                figures.borrowed_from = top
            else:
                figures.lent_to = top


# --------------------------------------------------------------------------- answers


def hours(seconds: float) -> float:
    return round(seconds / 3600, 4)


def money_text(amount: Decimal, priced: bool) -> str | None:
    return str(prices.cents(amount)) if priced else None


def _counterparts(book: Mapping[str, float] | None) -> list[dict[str, Any]] | None:
    if book is None:
        return None
    return [
        {"team": other, "gpu_hours": hours(seconds)}
        for other, seconds in sorted(book.items(), key=lambda item: (-item[1], item[0]))
        if hours(seconds)
    ]


def figures_dict(figures: Figures) -> dict[str, Any]:
    return {
        "allocated_gpu_hours": hours(figures.allocated),
        "busy_gpu_hours": hours(figures.busy) if figures.measured else None,
        "measured_gpu_hours": hours(figures.measured),
        "lost_gpu_hours": hours(figures.lost),
        "unpriced_gpu_hours": hours(figures.unpriced),
        "cost": money_text(figures.cost, figures.priced),
        "lost_cost": money_text(figures.lost_cost, figures.lost_priced),
        "borrowed_gpu_hours": None if figures.borrowed is None else hours(figures.borrowed),
        "lent_gpu_hours": None if figures.lent is None else hours(figures.lent),
        "borrowed_from": _counterparts(figures.borrowed_from),
        "lent_to": _counterparts(figures.lent_to),
    }


def report_dict(report: UsageReport) -> dict[str, Any]:
    """The report as the API answers it (JSON)."""
    return {
        "month": report.month.label,
        "from": report.month.start,
        "to": report.month.end,
        "group_by": list(report.group_by),
        "currency": report.currency,
        "as_of": report.as_of,
        "busy_source": report.busy_source,
        "rows": [{**row.keys, **figures_dict(row.figures)} for row in report.rows],
        "totals": figures_dict(report.totals),
    }


FIGURE_COLUMNS = (
    "allocated_gpu_hours",
    "busy_gpu_hours",
    "measured_gpu_hours",
    "lost_gpu_hours",
    "unpriced_gpu_hours",
    "cost",
    "lost_cost",
    "currency",
    "borrowed_gpu_hours",
    "lent_gpu_hours",
    "borrowed_from",
    "lent_to",
)


def _pairs_text(pairs: list[dict[str, Any]] | None) -> str:
    if pairs is None:
        return ""
    return "; ".join(f"{p['team'] or 'shared'}={p['gpu_hours']}" for p in pairs)


def csv_rows(answer: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The JSON answer's rows as CSV rows (one per group, with the month)."""
    rows = []
    for row in answer["rows"]:
        cells = {"month": answer["month"], "currency": answer["currency"]}
        for name in answer["group_by"]:
            cells[name] = row[name]
        for name in FIGURE_COLUMNS:
            if name in ("borrowed_from", "lent_to"):
                cells[name] = _pairs_text(row.get(name))
            elif name != "currency":
                cells[name] = "" if row.get(name) is None else row[name]
        rows.append(cells)
    return rows


def write_csv(answer: Mapping[str, Any], out: IO[str]) -> None:
    """The report as CSV; a cell a spreadsheet would read as a formula is quoted."""
    columns = ["month", *answer["group_by"], *FIGURE_COLUMNS]
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for row in csv_rows(answer):
        writer.writerow(
            {
                k: ("'" + v if isinstance(v, str) and v[:1] in FORMULA_STARTS else v)
                for k, v in row.items()
            }
        )
