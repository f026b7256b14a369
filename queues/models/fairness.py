"""A team's fair share as Berth last judged it: its own starvation threshold
(when it differs from BERTH_FAIR_SHARE_STARVED_BELOW), the figures of the last
evaluation, and the starvation episode the alerts follow (docs/fairness.md).
Figures are written by ``cluster.fairness``; episodes by
``approvals.fairness_alerts``, compare-and-set, so one episode is announced
once and cleared once however many workers evaluate."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from queues.models.teams import Team


class TeamFairness(models.Model):
    """One row per team, created by its first evaluation (or its threshold)."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="fairness")
    # Null: the installation's BERTH_FAIR_SHARE_STARVED_BELOW.
    starved_below = models.DecimalField(
        max_digits=4,
        decimal_places=3,
        null=True,
        blank=True,
        help_text="starved below this share; empty: the installation's",
    )
    # {window: {"received": GPU-hours, "deserved": GPU-hours, "waiting": seconds,
    #  "ratio": received/deserved or null}} for windows 1h, 24h, 7d.
    figures = models.JSONField(default=dict, blank=True)
    # GPUs its pending workloads asked for at the evaluation (0: nothing waits).
    waiting_gpus = models.PositiveIntegerField(default=0)
    evaluated_at = models.DateTimeField(null=True, blank=True)
    # The starvation episode under way (null: none), and how many there were.
    starved_since = models.DateTimeField(null=True, blank=True)
    episodes = models.PositiveIntegerField(default=0)
    # The last notice sent ("starved" or "cleared"), when, and what it reached.
    last_notice = models.CharField(max_length=16, blank=True)
    last_notice_at = models.DateTimeField(null=True, blank=True)
    last_notice_result = models.TextField(blank=True)

    class Meta:
        ordering = ["team__slug"]
        constraints = [
            models.CheckConstraint(
                condition=Q(starved_below__isnull=True)
                | (Q(starved_below__gt=0) & Q(starved_below__lte=1)),
                name="fairness_threshold_is_a_fraction",
            )
        ]

    def __str__(self) -> str:
        return f"fair share of {self.team_id}"
