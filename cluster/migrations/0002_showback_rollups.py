"""Showback's rollups (cluster.allocation): daily usage by team, queue class,
flavor and price; open allocations; preemptions with what they interrupted;
daily borrowing between teams. Workloads holding quota now get their open
allocation (from their reservation), and the stored hourly borrowing is added
up by team, so neither starts from nothing."""

from collections import defaultdict
from typing import Any

import django.db.models.deletion
from django.db import migrations, models

GPU = "nvidia.com/gpu"


def open_held_allocations(apps: Any, schema_editor: Any) -> None:
    WorkloadRecord = apps.get_model("cluster", "WorkloadRecord")
    OpenAllocation = apps.get_model("cluster", "OpenAllocation")
    ClusterQueue = apps.get_model("queues", "ClusterQueue")
    classes = dict(ClusterQueue.objects.values_list("name", "queue_class__name"))
    held = WorkloadRecord.objects.filter(
        state__in=["admitted", "quota-reserved"], admitted_at__isnull=False
    ).select_related("team")
    rows = []
    for record in held.iterator():
        gpus: dict[str, int] = defaultdict(int)
        for pod_set in record.pod_sets or []:
            per_pod = int((pod_set.get("requests") or {}).get(GPU, 0))
            count = int(pod_set.get("admitted_count", pod_set.get("count", 1)))
            flavor = (record.flavors or {}).get(pod_set.get("name", "main"), {}).get(GPU, "")
            if per_pod and count:
                gpus[str(flavor)] += per_pod * count
        start = record.reserved_at or record.admitted_at
        if record.reserved_at and record.reserved_at > record.admitted_at:
            start = record.admitted_at
        for flavor, amount in sorted(gpus.items()):
            rows.append(
                OpenAllocation(
                    workload_id=record.pk,
                    uid=record.uid,
                    team=record.team.slug if record.team else "",
                    queue_class=classes.get(record.cluster_queue) or "",
                    cluster_queue=record.cluster_queue,
                    flavor=flavor,
                    gpus=amount,
                    started_at=start,
                    admitted_at=record.admitted_at,
                    counted_until=start,
                )
            )
    OpenAllocation.objects.bulk_create(rows, ignore_conflicts=True)


def borrowing_by_team(apps: Any, schema_editor: Any) -> None:
    BorrowingRollup = apps.get_model("cluster", "BorrowingRollup")
    TeamBorrowingRollup = apps.get_model("cluster", "TeamBorrowingRollup")
    ClusterQueue = apps.get_model("queues", "ClusterQueue")
    teams = dict(ClusterQueue.objects.values_list("name", "team__slug"))
    days: dict[tuple[Any, str, str, str], float] = defaultdict(float)
    for hour, borrower, lender, flavor, seconds in BorrowingRollup.objects.values_list(
        "hour", "borrower", "lender", "flavor", "gpu_seconds"
    ).iterator():
        key = (hour.date(), teams.get(borrower) or "", teams.get(lender) or "", flavor)
        if key[1] != key[2]:
            days[key] += seconds
    TeamBorrowingRollup.objects.bulk_create(
        [
            TeamBorrowingRollup(
                day=day, borrower=borrower, lender=lender, flavor=flavor, gpu_seconds=seconds
            )
            for (day, borrower, lender, flavor), seconds in sorted(days.items())
        ]
    )


class Migration(migrations.Migration):
    dependencies = [
        ("cluster", "0001_initial"),
        ("queues", "0010_policy_change_note"),
    ]

    operations = [
        migrations.CreateModel(
            name="PreemptionLoss",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("at", models.DateTimeField(db_index=True)),
                ("uid", models.CharField(max_length=64)),
                ("team", models.CharField(blank=True, max_length=63)),
                ("queue_class", models.CharField(blank=True, max_length=63)),
                ("flavor", models.CharField(blank=True, max_length=253)),
                ("price", models.CharField(blank=True, max_length=24)),
                ("gpus", models.PositiveIntegerField()),
                ("seconds", models.FloatField()),
                ("namespace", models.CharField(blank=True, max_length=63)),
                ("job_kind", models.CharField(blank=True, max_length=64)),
                ("job_name", models.CharField(blank=True, max_length=253)),
            ],
            options={
                "ordering": ["-at", "id"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("uid", "at", "flavor"), name="unique_preemption_loss"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="TeamBorrowingRollup",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("day", models.DateField()),
                ("borrower", models.CharField(blank=True, max_length=63)),
                ("lender", models.CharField(blank=True, max_length=63)),
                ("flavor", models.CharField(max_length=253)),
                ("gpu_seconds", models.FloatField(default=0.0)),
            ],
            options={
                "ordering": ["-day", "borrower", "lender", "flavor"],
                "indexes": [models.Index(fields=["day"], name="cluster_tea_day_f2a276_idx")],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("day", "borrower", "lender", "flavor"), name="unique_team_borrowing"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="UsageRollup",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("day", models.DateField()),
                ("team", models.CharField(blank=True, max_length=63)),
                ("queue_class", models.CharField(blank=True, max_length=63)),
                ("flavor", models.CharField(blank=True, max_length=253)),
                ("price", models.CharField(blank=True, max_length=24)),
                ("gpu_seconds", models.FloatField(default=0.0)),
                ("busy_gpu_seconds", models.FloatField(default=0.0)),
                ("measured_gpu_seconds", models.FloatField(default=0.0)),
                ("busy_source", models.CharField(blank=True, max_length=16)),
            ],
            options={
                "ordering": ["-day", "team", "queue_class", "flavor", "price"],
                "indexes": [
                    models.Index(fields=["day", "team"], name="cluster_usa_day_f7955d_idx")
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("day", "team", "queue_class", "flavor", "price"),
                        name="unique_usage_rollup",
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="OpenAllocation",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("uid", models.CharField(max_length=64)),
                ("team", models.CharField(blank=True, max_length=63)),
                ("queue_class", models.CharField(blank=True, max_length=63)),
                ("cluster_queue", models.CharField(blank=True, max_length=253)),
                ("flavor", models.CharField(blank=True, max_length=253)),
                ("gpus", models.PositiveIntegerField()),
                ("started_at", models.DateTimeField()),
                ("admitted_at", models.DateTimeField()),
                ("counted_until", models.DateTimeField()),
                ("ended_at", models.DateTimeField(blank=True, null=True)),
                (
                    "workload",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="cluster.workloadrecord",
                    ),
                ),
            ],
            options={
                "ordering": ["started_at", "id"],
                "indexes": [models.Index(fields=["uid"], name="cluster_ope_uid_961b85_idx")],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("uid", "flavor", "started_at"), name="unique_open_allocation"
                    )
                ],
            },
        ),
        migrations.RunPython(open_held_allocations, migrations.RunPython.noop),
        migrations.RunPython(borrowing_by_team, migrations.RunPython.noop),
    ]
