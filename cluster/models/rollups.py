"""Hourly rollups the dashboard and /metrics read instead of the event log:
admissions with a histogram of their waits, and preemptions by reason. Written
by sync in the same transaction as the event that counts, so replaying events
adds nothing twice.

Its tables keep the ``jobs_`` names they had before ``jobs/`` was split
(``db_table``), so the split moved no data."""

from __future__ import annotations

import math

from django.db import models

# Upper bounds (seconds) of the wait histogram; the last bucket is open.
WAIT_BUCKETS: tuple[float, ...] = (
    10,
    30,
    60,
    300,
    900,
    1800,
    3600,
    7200,
    14400,
    28800,
    86400,
    259200,
    math.inf,
)


# One integer column per bucket, so the database sums histograms (GROUP BY) and
# no page decodes JSON per row; SQLite (the embedded mode) can do it too.
BUCKET_FIELDS: tuple[str, ...] = tuple(f"b{index:02d}" for index in range(len(WAIT_BUCKETS)))


class WaitRollup(models.Model):
    """Admissions to one ClusterQueue in one hour, and how long they waited
    (since they were queued, or requeued after an eviction)."""

    cluster_queue = models.CharField(max_length=253)
    hour = models.DateTimeField()
    admissions = models.PositiveIntegerField(default=0)
    wait_seconds_sum = models.FloatField(default=0.0)
    gpus_admitted = models.PositiveBigIntegerField(default=0)
    # Admissions whose wait was at most WAIT_BUCKETS[i] (and above the bound before).
    b00 = models.PositiveIntegerField(default=0)
    b01 = models.PositiveIntegerField(default=0)
    b02 = models.PositiveIntegerField(default=0)
    b03 = models.PositiveIntegerField(default=0)
    b04 = models.PositiveIntegerField(default=0)
    b05 = models.PositiveIntegerField(default=0)
    b06 = models.PositiveIntegerField(default=0)
    b07 = models.PositiveIntegerField(default=0)
    b08 = models.PositiveIntegerField(default=0)
    b09 = models.PositiveIntegerField(default=0)
    b10 = models.PositiveIntegerField(default=0)
    b11 = models.PositiveIntegerField(default=0)
    b12 = models.PositiveIntegerField(default=0)

    class Meta:
        db_table = "jobs_waitrollup"
        ordering = ["-hour", "cluster_queue"]
        constraints = [
            models.UniqueConstraint(fields=["cluster_queue", "hour"], name="unique_wait_rollup")
        ]
        indexes = [models.Index(fields=["hour", "cluster_queue"])]

    def __str__(self) -> str:
        return f"{self.cluster_queue} @ {self.hour:%Y-%m-%d %H}h: {self.admissions}"

    @property
    def buckets(self) -> list[int]:
        return [int(getattr(self, name)) for name in BUCKET_FIELDS]


class PreemptionRollup(models.Model):
    """Evictions of one ClusterQueue's workloads in one hour, by reason, and
    the GPU time they interrupted (work since their last admission)."""

    cluster_queue = models.CharField(max_length=253)
    hour = models.DateTimeField()
    reason = models.CharField(max_length=64)
    preempted = models.BooleanField(default=True, help_text="preempted, not evicted otherwise")
    count = models.PositiveIntegerField(default=0)
    gpu_seconds_interrupted = models.FloatField(default=0.0)

    class Meta:
        db_table = "jobs_preemptionrollup"
        ordering = ["-hour", "cluster_queue", "reason"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster_queue", "hour", "reason", "preempted"],
                name="unique_preemption_rollup",
            )
        ]
        indexes = [models.Index(fields=["hour"])]

    def __str__(self) -> str:
        return f"{self.cluster_queue} @ {self.hour:%Y-%m-%d %H}h: {self.reason} × {self.count}"


class PendingForecast(models.Model):
    """What the engine said about a pending workload at the last sync: its place
    in line, why it waits, and when it may start. Pages read this instead of
    running the engine per request."""

    workload = models.OneToOneField(
        "cluster.WorkloadRecord", on_delete=models.CASCADE, related_name="forecast"
    )
    cluster_queue = models.CharField(max_length=253, db_index=True)
    position = models.PositiveIntegerField(null=True, blank=True)
    reason = models.CharField(max_length=64, blank=True)
    message = models.TextField(blank=True)
    earliest_start = models.DateTimeField(null=True, blank=True)
    latest_start = models.DateTimeField(null=True, blank=True)
    explanation = models.JSONField(default=dict)
    computed_at = models.DateTimeField()

    class Meta:
        db_table = "jobs_pendingforecast"
        ordering = ["cluster_queue", "position"]

    def __str__(self) -> str:
        return f"{self.workload} #{self.position} in {self.cluster_queue}"


class BorrowingRollup(models.Model):
    """GPU-seconds one ClusterQueue borrowed from another in one hour. Kueue
    reports only what a queue borrows; Berth attributes it to the lenders of
    its cohort tree in proportion to their unused lendable quota."""

    hour = models.DateTimeField()
    borrower = models.CharField(max_length=253)
    lender = models.CharField(max_length=253)
    flavor = models.CharField(max_length=253)
    gpu_seconds = models.FloatField(default=0.0)

    class Meta:
        db_table = "jobs_borrowingrollup"
        ordering = ["-hour", "borrower", "lender"]
        constraints = [
            models.UniqueConstraint(
                fields=["hour", "borrower", "lender", "flavor"], name="unique_borrowing_rollup"
            )
        ]
        indexes = [models.Index(fields=["hour"])]

    def __str__(self) -> str:
        return f"{self.borrower} ← {self.lender} @ {self.hour:%Y-%m-%d %H}h"


class FairShareRollup(models.Model):
    """A ClusterQueue's weighted share of its cohort tree's lendable GPUs,
    averaged per hour (share_sum / samples): borrowed ÷ lendable ÷ weight."""

    hour = models.DateTimeField()
    cluster_queue = models.CharField(max_length=253)
    cohort = models.CharField(max_length=253)
    share_sum = models.FloatField(default=0.0)
    samples = models.PositiveIntegerField(default=0)

    class Meta:
        db_table = "jobs_fairsharerollup"
        ordering = ["-hour", "cluster_queue"]
        constraints = [
            models.UniqueConstraint(fields=["hour", "cluster_queue"], name="unique_share_rollup")
        ]
        indexes = [models.Index(fields=["cohort", "hour"])]

    def __str__(self) -> str:
        return f"{self.cluster_queue} @ {self.hour:%Y-%m-%d %H}h"


class TeamUsageSnapshot(models.Model):
    """A team's GPUs at one instant: allocated to its admitted workloads, and
    busy (from DCGM by namespace, or the simulated cluster; None when unknown)."""

    at = models.DateTimeField(db_index=True)
    team = models.ForeignKey("queues.Team", on_delete=models.CASCADE, related_name="usage")
    allocated = models.PositiveIntegerField(default=0)
    utilised = models.FloatField(null=True, blank=True)
    utilisation_source = models.CharField(max_length=16, blank=True)

    class Meta:
        db_table = "jobs_teamusagesnapshot"
        ordering = ["-at", "team"]
        constraints = [
            models.UniqueConstraint(fields=["at", "team"], name="unique_team_usage_snapshot")
        ]
        indexes = [models.Index(fields=["team", "-at"])]

    def __str__(self) -> str:
        return f"{self.team_id} @ {self.at}: {self.allocated} GPUs"


class UsageRollup(models.Model):
    """Showback's figures: the GPU time one team's workloads of one queue class
    held on one flavor in one UTC month, at one price per GPU-hour (a month
    whose price changed has a row for each price, so every hour is charged at
    the price in force then). Written by sync (``cluster.allocation``): the
    allocated time exactly, from each workload's quota reservation to its
    eviction or end; the busy time sampled at every snapshot. By month, as the
    report reads it: a month of 200 teams is a few thousand rows."""

    month = models.DateField(help_text="its first day")
    # The workload's team slug ("" for a namespace no team owns) and the class of
    # the ClusterQueue that admitted it (its workload.ai/type, docs/showback.md).
    team = models.CharField(max_length=63, blank=True)
    queue_class = models.CharField(max_length=63, blank=True)
    flavor = models.CharField(max_length=253, blank=True)
    # The price per GPU-hour in force ("2.50", queues.prices); "" when not priced.
    price = models.CharField(max_length=24, blank=True)
    # Quota reserved (then admitted) × GPUs.
    gpu_seconds = models.FloatField(default=0.0)
    # GPUs busy × seconds, from DCGM (or the simulated cluster), and the
    # allocated GPU-seconds of the samples that measured it.
    busy_gpu_seconds = models.FloatField(default=0.0)
    measured_gpu_seconds = models.FloatField(default=0.0)
    busy_source = models.CharField(max_length=16, blank=True)

    class Meta:
        ordering = ["-month", "team", "queue_class", "flavor", "price"]
        constraints = [
            models.UniqueConstraint(
                fields=["month", "team", "queue_class", "flavor", "price"],
                name="unique_usage_rollup",
            )
        ]
        indexes = [models.Index(fields=["month", "team"])]

    def __str__(self) -> str:
        return f"{self.team or '-'}/{self.queue_class or '-'}/{self.flavor} in {self.month:%Y-%m}"


class OpenAllocation(models.Model):
    """GPUs a workload holds on one flavor, from its quota reservation on, while
    they are not yet all counted into ``UsageRollup``: opened by sync when the
    workload is admitted, ended by its eviction (``ended_at``) or found ended
    at a snapshot; each snapshot counts its time up to then and drops it once
    ended and counted."""

    workload = models.ForeignKey(
        "cluster.WorkloadRecord", null=True, on_delete=models.SET_NULL, related_name="+"
    )
    uid = models.CharField(max_length=64)
    team = models.CharField(max_length=63, blank=True)
    queue_class = models.CharField(max_length=63, blank=True)
    cluster_queue = models.CharField(max_length=253, blank=True)
    flavor = models.CharField(max_length=253, blank=True)
    gpus = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    admitted_at = models.DateTimeField()
    counted_until = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["started_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["uid", "flavor", "started_at"], name="unique_open_allocation"
            )
        ]
        indexes = [models.Index(fields=["uid"])]

    def __str__(self) -> str:
        return f"{self.uid} {self.gpus} × {self.flavor} since {self.started_at}"


class PreemptionLoss(models.Model):
    """One preemption of a workload's GPUs on one flavor: how long they had run
    since its admission. What was lost is the work since its last checkpoint,
    which only the job knows (its checkpoint interval): the report works it out
    (``jobs.showback``); without a Berth job, all of it."""

    at = models.DateTimeField(db_index=True)
    uid = models.CharField(max_length=64)
    team = models.CharField(max_length=63, blank=True)
    queue_class = models.CharField(max_length=63, blank=True)
    flavor = models.CharField(max_length=253, blank=True)
    price = models.CharField(max_length=24, blank=True)
    gpus = models.PositiveIntegerField()
    seconds = models.FloatField()
    # To find the Berth job it ran (jobs.JobRequest: namespace, kind, name).
    namespace = models.CharField(max_length=63, blank=True)
    job_kind = models.CharField(max_length=64, blank=True)
    job_name = models.CharField(max_length=253, blank=True)

    class Meta:
        ordering = ["-at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["uid", "at", "flavor"], name="unique_preemption_loss")
        ]

    def __str__(self) -> str:
        return f"{self.uid} preempted at {self.at}: {self.gpus} × {self.seconds:.0f} s"


class TeamBorrowingRollup(models.Model):
    """GPU-seconds one team's queues borrowed from another team's in one UTC
    month, per flavor (the borrowing rollup's pairs, by the queues' teams then;
    "" for a shared queue). Showback reads it for "borrowed from and lent to
    whom": by month, as the report is, since a cohort of many teams lends in
    many small pairs (every queue with unused quota lends a share)."""

    month = models.DateField(help_text="its first day")
    borrower = models.CharField(max_length=63, blank=True)
    lender = models.CharField(max_length=63, blank=True)
    flavor = models.CharField(max_length=253)
    gpu_seconds = models.FloatField(default=0.0)

    class Meta:
        ordering = ["-month", "borrower", "lender", "flavor"]
        constraints = [
            models.UniqueConstraint(
                fields=["month", "borrower", "lender", "flavor"], name="unique_team_borrowing"
            )
        ]
        indexes = [
            models.Index(fields=["month", "borrower"]),
            models.Index(fields=["month", "lender"]),
        ]

    def __str__(self) -> str:
        return f"{self.borrower or 'shared'} ← {self.lender or 'shared'} in {self.month:%Y-%m}"


class TeamBorrowingTotal(models.Model):
    """What one team borrowed and lent of one flavor in one UTC month, all
    counterparts together (``TeamBorrowingRollup`` added up, kept as sync adds
    to it): the report's borrowed and lent figures for every team at once,
    without reading a month's pairs."""

    month = models.DateField(help_text="its first day")
    team = models.CharField(max_length=63, blank=True)
    flavor = models.CharField(max_length=253)
    borrowed_gpu_seconds = models.FloatField(default=0.0)
    lent_gpu_seconds = models.FloatField(default=0.0)

    class Meta:
        ordering = ["-month", "team", "flavor"]
        constraints = [
            models.UniqueConstraint(
                fields=["month", "team", "flavor"], name="unique_team_borrowing_total"
            )
        ]

    def __str__(self) -> str:
        return f"{self.team or 'shared'}/{self.flavor} in {self.month:%Y-%m}"
