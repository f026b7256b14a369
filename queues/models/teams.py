from __future__ import annotations

from django.conf import settings
from django.db import models

from queues.choices import TeamRole
from queues.models.base import PolicyObject


class Team(PolicyObject):
    """A group of people who own namespaces and submit work to the cluster."""

    slug = models.CharField(max_length=63, unique=True, help_text="RFC 1123 label, e.g. research")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class TeamNamespace(models.Model):
    """A Kubernetes namespace owned by exactly one team."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="namespaces")
    name = models.CharField(max_length=63, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class TeamMembership(models.Model):
    """A user's role in a team: members submit and see the team's jobs; approvers
    also decide the team's approval requests (urgent-release)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="team_memberships"
    )
    role = models.CharField(max_length=16, choices=TeamRole.choices, default=TeamRole.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team__slug", "user__username", "role"]
        constraints = [
            models.UniqueConstraint(fields=["team", "user", "role"], name="unique_team_role")
        ]

    def __str__(self) -> str:
        return f"{self.user} is {self.role} of {self.team}"
