"""Showback's usage and team borrowing by month instead of by day: the report
reads a month, so a month of 200 teams is a few thousand usage rows; and in a
cohort of many teams every queue with unused quota lends a share, so a day's
borrowing pairs are many and small. The daily rows are added up into their
month, and each team's borrowed and lent totals kept beside the pairs."""

from collections import defaultdict
from typing import Any

from django.db import migrations, models

USAGE_KEY = ("team", "queue_class", "flavor", "price")
USAGE_FIGURES = ("gpu_seconds", "busy_gpu_seconds", "measured_gpu_seconds")


def by_month(apps: Any, schema_editor: Any) -> None:
    Borrowing = apps.get_model("cluster", "TeamBorrowingRollup")
    pairs: dict[tuple[Any, ...], float] = defaultdict(float)
    for day, borrower, lender, flavor, seconds in Borrowing.objects.values_list(
        "day", "borrower", "lender", "flavor", "gpu_seconds"
    ).iterator():
        pairs[(day.replace(day=1), borrower, lender, flavor)] += seconds
    Borrowing.objects.all().delete()
    Borrowing.objects.bulk_create(
        [
            Borrowing(day=month, borrower=borrower, lender=lender, flavor=flavor, gpu_seconds=s)
            for (month, borrower, lender, flavor), s in sorted(pairs.items())
        ]
    )
    Usage = apps.get_model("cluster", "UsageRollup")
    months: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in Usage.objects.all().iterator():
        key = (row.day.replace(day=1), *(getattr(row, f) for f in USAGE_KEY))
        entry = months.setdefault(key, dict.fromkeys(USAGE_FIGURES, 0.0) | {"busy_source": ""})
        for name in USAGE_FIGURES:
            entry[name] += getattr(row, name)
        entry["busy_source"] = entry["busy_source"] or row.busy_source
    Usage.objects.all().delete()
    Usage.objects.bulk_create(
        [
            Usage(day=key[0], **dict(zip(USAGE_KEY, key[1:], strict=True)), **figures)
            for key, figures in sorted(months.items())
        ]
    )


def team_totals(apps: Any, schema_editor: Any) -> None:
    Borrowing = apps.get_model("cluster", "TeamBorrowingRollup")
    Total = apps.get_model("cluster", "TeamBorrowingTotal")
    totals: dict[tuple[Any, ...], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for month, borrower, lender, flavor, seconds in Borrowing.objects.values_list(
        "month", "borrower", "lender", "flavor", "gpu_seconds"
    ).iterator():
        totals[(month, borrower, flavor)][0] += seconds
        totals[(month, lender, flavor)][1] += seconds
    Total.objects.bulk_create(
        [
            Total(
                month=month,
                team=team,
                flavor=flavor,
                borrowed_gpu_seconds=borrowed,
                lent_gpu_seconds=lent,
            )
            for (month, team, flavor), (borrowed, lent) in sorted(totals.items())
        ]
    )


class Migration(migrations.Migration):
    dependencies = [
        ("cluster", "0002_showback_rollups"),
    ]

    operations = [
        migrations.RunPython(by_month, migrations.RunPython.noop),
        migrations.RemoveConstraint(model_name="teamborrowingrollup", name="unique_team_borrowing"),
        migrations.RemoveIndex(model_name="teamborrowingrollup", name="cluster_tea_day_f2a276_idx"),
        migrations.RenameField(model_name="teamborrowingrollup", old_name="day", new_name="month"),
        migrations.AlterField(
            model_name="teamborrowingrollup",
            name="month",
            field=models.DateField(help_text="its first day"),
        ),
        migrations.AlterModelOptions(
            name="teamborrowingrollup",
            options={"ordering": ["-month", "borrower", "lender", "flavor"]},
        ),
        migrations.AddConstraint(
            model_name="teamborrowingrollup",
            constraint=models.UniqueConstraint(
                fields=("month", "borrower", "lender", "flavor"), name="unique_team_borrowing"
            ),
        ),
        migrations.AddIndex(
            model_name="teamborrowingrollup",
            index=models.Index(fields=["month", "borrower"], name="cluster_tea_month_8bd85e_idx"),
        ),
        migrations.RemoveConstraint(model_name="usagerollup", name="unique_usage_rollup"),
        migrations.RemoveIndex(model_name="usagerollup", name="cluster_usa_day_f7955d_idx"),
        migrations.RenameField(model_name="usagerollup", old_name="day", new_name="month"),
        migrations.AlterField(
            model_name="usagerollup",
            name="month",
            field=models.DateField(help_text="its first day"),
        ),
        migrations.AlterModelOptions(
            name="usagerollup",
            options={"ordering": ["-month", "team", "queue_class", "flavor", "price"]},
        ),
        migrations.AddConstraint(
            model_name="usagerollup",
            constraint=models.UniqueConstraint(
                fields=("month", "team", "queue_class", "flavor", "price"),
                name="unique_usage_rollup",
            ),
        ),
        migrations.AddIndex(
            model_name="usagerollup",
            index=models.Index(fields=["month", "team"], name="cluster_usa_month_e91b56_idx"),
        ),
        migrations.AddIndex(
            model_name="teamborrowingrollup",
            index=models.Index(fields=["month", "lender"], name="cluster_tea_month_d4bbe7_idx"),
        ),
        migrations.CreateModel(
            name="TeamBorrowingTotal",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("month", models.DateField(help_text="its first day")),
                ("team", models.CharField(blank=True, max_length=63)),
                ("flavor", models.CharField(max_length=253)),
                ("borrowed_gpu_seconds", models.FloatField(default=0.0)),
                ("lent_gpu_seconds", models.FloatField(default=0.0)),
            ],
            options={
                "ordering": ["-month", "team", "flavor"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("month", "team", "flavor"), name="unique_team_borrowing_total"
                    )
                ],
            },
        ),
        migrations.RunPython(team_totals, migrations.RunPython.noop),
    ]
