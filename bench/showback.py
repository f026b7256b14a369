"""Showback's report at the size of a large organisation: a month of 200 teams.

Builds 200 teams × 3 team queues + a shared queue (bench/org.py), prices for
both flavors (h100-ondemand changes price mid-month, so that month has rows at
both prices), and what sync keeps for showback over --months months: usage
per month, team, queue class, flavor and price; preemptions (half of them run
by Berth jobs that checkpoint, which the report looks up); and borrowing
between teams by month (a quarter of the teams borrowing from 40 others each
day: a large cohort lends in many small pairs). Then times, through the real
URL stack with a bearer token, ``GET /api/v1/reports/usage/`` for one month as
an admin (every team) and as a member (one team), grouped several ways, as
JSON and CSV; and one snapshot's showback work in sync (``count_snapshot``)
with that many workloads running. ``--keep NAME`` builds into database NAME
once and reuses it.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/showback.py

It creates a scratch database ``berth_bench_<pid>`` and drops it at the end.
Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from datetime import UTC, date, datetime, timedelta

from load import with_kept_database
from org import FLAVORS, TEAM_CLASSES, build_org, with_scratch_database
from policy import summary, timed_request

GPU = "nvidia.com/gpu"


def months_back(first: date, count: int) -> list[date]:
    found = [first]
    while len(found) < count:
        day = found[-1]
        found.append(date(day.year - (day.month == 1), (day.month - 2) % 12 + 1, 1))
    return sorted(found)


def timed_month() -> date:
    """The month the report is timed on: the last full one."""
    from django.utils import timezone

    today = timezone.now().date()
    return months_back(date(today.year, today.month, 1), 2)[0]


def build_showback(teams: int, months: int, seed: int = 7) -> None:
    """Sync's showback rows for the ``months`` full months before this one."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from cluster.models import (
        PreemptionLoss,
        TeamBorrowingRollup,
        TeamBorrowingTotal,
        UsageRollup,
    )
    from jobs.models import JobRequest
    from queues import services
    from queues.choices import PolicyKind
    from queues.models import PolicyChange, ResourceFlavor, Team

    rng = random.Random(seed)
    today = timezone.now().date()
    this_month = date(today.year, today.month, 1)
    firsts = months_back(this_month, months + 1)[:-1]  # full months before this one
    timed = firsts[-1]
    price_change = datetime(timed.year, timed.month, 15, 12, tzinfo=UTC)
    for name, price in (("h100-ondemand", "2.49"), ("h100-spot", "0.8725")):
        services.resource_flavors.update(
            actor=None, obj=ResourceFlavor.objects.get(name=name), data={"gpu_hour_price": price}
        )
    PolicyChange.objects.filter(kind=PolicyKind.RESOURCE_FLAVOR).update(
        at=datetime(firsts[0].year, firsts[0].month, 1, tzinfo=UTC) - timedelta(days=1)
    )
    services.resource_flavors.update(
        actor=None,
        obj=ResourceFlavor.objects.get(name="h100-ondemand"),
        data={"gpu_hour_price": "3.00"},
    )
    latest = PolicyChange.objects.filter(object_name="h100-ondemand").order_by("-id")[0]
    PolicyChange.objects.filter(pk=latest.pk).update(at=price_change)

    slugs = list(Team.objects.order_by("slug").values_list("slug", flat=True))
    member = get_user_model().objects.create_user("bench-member", password="x")
    services.set_membership(
        actor=None, team=Team.objects.get(slug=slugs[0]), username=member.username,
        role="member", present=True,
    )  # fmt: skip
    usage: dict[tuple[date, str, str, str, str], list[float]] = {}
    pairs: dict[tuple[date, str, str, str], float] = {}
    losses: list[PreemptionLoss] = []
    jobs: list[JobRequest] = []
    team_ids = dict(Team.objects.values_list("slug", "id"))
    print(f"showback rows for {len(slugs)} teams over {months} month(s) ...", flush=True)
    day = firsts[0]
    end = this_month
    while day < end:
        for slug in slugs:
            for queue_class in TEAM_CLASSES:
                for flavor in FLAVORS:
                    price = "0.8725" if flavor == "h100-spot" else "2.49"
                    if flavor == "h100-ondemand" and day >= price_change.date():
                        price = "3.00"
                    seconds = rng.randint(0, 8) * 3600.0
                    figures = usage.setdefault(
                        (day.replace(day=1), slug, queue_class, flavor, price), [0.0, 0.0]
                    )
                    figures[0] += seconds
                    figures[1] += seconds * rng.uniform(0.5, 0.95)
                    if day == price_change.date() and flavor == "h100-ondemand":
                        # The hours of that day before noon, at the old price.
                        key = (day.replace(day=1), slug, queue_class, flavor, "2.49")
                        usage.setdefault(key, [0.0, 0.0])[0] += 3600.0
            if rng.random() < 0.66:  # about 20 preemptions a team a month
                at = datetime(day.year, day.month, day.day, rng.randint(0, 23), tzinfo=UTC)
                name = f"job-{slug}-{len(losses)}"
                if len(losses) % 2 == 0:
                    jobs.append(
                        JobRequest(
                            name=name, team_id=team_ids[slug], namespace=slug, kind="Job",
                            image="trainer:1", local_queue=f"{slug}-training-large",
                            cluster_queue=f"{slug}-training-large", nodes=1, gpus_per_node=8,
                            checkpoint_uri="s3://bucket/x", checkpoint_interval_seconds=1800,
                            submitted_at=at - timedelta(hours=3), state="succeeded",
                        )
                    )  # fmt: skip
                losses.append(
                    PreemptionLoss(
                        at=at, uid=f"uid-{len(losses)}", team=slug, queue_class="training-large",
                        flavor=rng.choice(FLAVORS), price="2.49", gpus=8,
                        seconds=rng.randint(60, 6 * 3600), namespace=slug, job_kind="Job",
                        job_name=name,
                    )
                )  # fmt: skip
        # A quarter of the teams borrow each day, from 40 others each: a large
        # cohort lends in many small pairs (every queue with unused quota a share).
        for slug in rng.sample(slugs, len(slugs) // 4):
            for lender in rng.sample(slugs, min(40, len(slugs))):
                if lender != slug:
                    pair = (day.replace(day=1), slug, lender, rng.choice(FLAVORS))
                    pairs[pair] = pairs.get(pair, 0.0) + rng.randint(1, 40) * 360.0
        day += timedelta(days=1)
    borrowing = [
        TeamBorrowingRollup(
            month=month, borrower=borrower, lender=lender, flavor=flavor, gpu_seconds=seconds
        )
        for (month, borrower, lender, flavor), seconds in pairs.items()
    ]
    totals: dict[tuple[date, str, str], list[float]] = {}
    for (month, borrower, lender, flavor), seconds in pairs.items():
        totals.setdefault((month, borrower, flavor), [0.0, 0.0])[0] += seconds
        totals.setdefault((month, lender, flavor), [0.0, 0.0])[1] += seconds
    TeamBorrowingTotal.objects.bulk_create(
        [
            TeamBorrowingTotal(
                month=month, team=team, flavor=flavor, borrowed_gpu_seconds=borrowed,
                lent_gpu_seconds=lent,
            )
            for (month, team, flavor), (borrowed, lent) in totals.items()
        ],
        batch_size=5000,
    )  # fmt: skip
    UsageRollup.objects.bulk_create(
        [
            UsageRollup(
                month=month, team=team, queue_class=queue_class, flavor=flavor, price=price,
                gpu_seconds=allocated, busy_gpu_seconds=busy, measured_gpu_seconds=allocated,
                busy_source="prometheus",
            )
            for (month, team, queue_class, flavor, price), (allocated, busy) in usage.items()
        ],
        batch_size=5000,
    )  # fmt: skip
    TeamBorrowingRollup.objects.bulk_create(borrowing, batch_size=5000)
    JobRequest.objects.bulk_create(jobs, batch_size=5000)
    PreemptionLoss.objects.bulk_create(losses, batch_size=5000)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    print(
        f"stored: {UsageRollup.objects.count():,} usage rows "
        f"({UsageRollup.objects.filter(month=timed).count():,} in {timed:%Y-%m}), "
        f"{TeamBorrowingRollup.objects.count():,} team borrowing pairs "
        f"({TeamBorrowingRollup.objects.filter(month=timed).count():,}), "
        f"{PreemptionLoss.objects.count():,} preemptions, {JobRequest.objects.count():,} jobs"
    )


def time_snapshot(running: int) -> None:
    """One snapshot's showback work in sync with ``running`` workloads holding GPUs."""
    from django.utils import timezone

    from cluster.allocation import count_snapshot
    from cluster.models import OpenAllocation, QueueSnapshot, WorkloadRecord, WorkloadState
    from queues.models import Team

    now = timezone.now().replace(microsecond=0)
    slugs = list(Team.objects.values_list("slug", flat=True))
    # A kept database: the last run's go first.
    OpenAllocation.objects.all().delete()
    WorkloadRecord.objects.filter(uid__startswith="running-").delete()
    records = WorkloadRecord.objects.bulk_create(
        [
            WorkloadRecord(
                uid=f"running-{index}", namespace=slugs[index % len(slugs)],
                name=f"job-running-{index}", state=WorkloadState.ADMITTED,
                cluster_queue=f"{slugs[index % len(slugs)]}-training-large",
                requested={GPU: 8}, created_at=now - timedelta(hours=3),
                admitted_at=now - timedelta(hours=2),
            )
            for index in range(running)
        ]
    )  # fmt: skip
    OpenAllocation.objects.bulk_create(
        [
            OpenAllocation(
                workload=record, uid=record.uid, team=record.namespace,
                queue_class="training-large", cluster_queue=record.cluster_queue,
                flavor=FLAVORS[index % 2], gpus=8, started_at=now - timedelta(hours=2),
                admitted_at=now - timedelta(hours=2), counted_until=now - timedelta(minutes=1),
            )
            for index, record in enumerate(records)
        ]
    )  # fmt: skip
    rows = [
        QueueSnapshot(
            at=now, cluster_queue=f"{slug}-training-large", flavor=flavor, resource=GPU,
            utilised=12.0,
        )
        for slug in slugs
        for flavor in FLAVORS
    ]  # fmt: skip
    times = []
    for step in range(5):
        at = now + timedelta(seconds=30 * step)
        for row in rows:
            row.at = at
        started = time.perf_counter()
        count_snapshot(rows, at, 30.0, "prometheus")
        times.append(time.perf_counter() - started)
    assert OpenAllocation.objects.count() == running  # each snapshot counted them all
    print(summary(f"sync: one snapshot, {running} workloads running", times))


def run(teams: int, months: int, requests: int, running: int, fresh: bool = True) -> None:
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    from accounts.services import create_token
    from cluster.models import UsageRollup

    started = time.perf_counter()
    if fresh:
        build_org(teams)
        build_showback(teams, months)
        get_user_model().objects.create_superuser("bench-admin", password="x")
        print(f"built in {time.perf_counter() - started:.0f} s")
    month = timed_month()
    print(f"{UsageRollup.objects.count():,} usage rows stored")
    admin = get_user_model().objects.get(username="bench-admin")
    member = get_user_model().objects.get(username="bench-member")
    label = f"{month:%Y-%m}"
    cases = [
        ("team", {"group_by": "team"}),
        ("team,type", {"group_by": "team,type"}),
        ("team,type,flavor", {"group_by": "team,type,flavor"}),
        ("flavor", {"group_by": "flavor"}),
        ("team,type CSV", {"group_by": "team,type", "format": "csv"}),
    ]
    print()
    for role, user in (("admin", admin), ("member", member)):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {create_token(user=user, name='b').secret}")
        for name, query in cases:
            params = {"month": label, **query}
            answer = client.get("/api/v1/reports/usage/", params)  # warm
            rows = len(answer.json()["rows"]) if "format" not in query else "csv"
            times = [
                timed_request(
                    lambda client=client, params=params: client.get(
                        "/api/v1/reports/usage/", params
                    )
                )
                for _ in range(requests)
            ]
            print(summary(f"usage {label} by {name} ({role}, {rows} rows)", times))
    print()
    time_snapshot(running)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teams", type=int, default=200)
    parser.add_argument("--months", type=int, default=12, help="months of rows stored")
    parser.add_argument("--requests", type=int, default=40, help="requests per case and role")
    parser.add_argument("--running", type=int, default=1200, help="workloads open at a snapshot")
    parser.add_argument(
        "--keep",
        metavar="NAME",
        default="",
        help="build into database NAME once and keep it; later runs reuse it (drop it yourself)",
    )
    args = parser.parse_args()
    os.environ["BERTH_RECONCILE_ON_CHANGE"] = "0"
    if args.keep:
        return with_kept_database(
            args.keep,
            lambda fresh: run(args.teams, args.months, args.requests, args.running, fresh),
        )
    return with_scratch_database(
        "bench/showback.py", lambda: run(args.teams, args.months, args.requests, args.running)
    )


if __name__ == "__main__":
    sys.exit(main())
