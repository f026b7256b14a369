"""How far each team's job requests have changed: a number PostgreSQL itself
moves forward (triggers on ``jobs_jobrequest``, see migration 0016) in the same
transaction as the change, so a reader that sees a version sees exactly the
rows written up to it. Answers built from a team's jobs are cached under these
numbers (``jobs.answers``); any committed write, by any process and by any
path (``update()``, bulk writes, SQL), makes the old answers unreachable."""

from __future__ import annotations

from django.db import models

from queues.models import Team


class TeamJobsVersion(models.Model):
    team = models.OneToOneField(
        Team, on_delete=models.CASCADE, primary_key=True, related_name="jobs_version"
    )
    # A value of the sequence jobs_version_seq: strictly larger after each change.
    version = models.BigIntegerField()

    class Meta:
        db_table = "jobs_teamjobsversion"

    def __str__(self) -> str:
        return f"team {self.team_id}: jobs version {self.version}"
