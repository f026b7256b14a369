from __future__ import annotations

from django.conf import settings
from django.db import models

from queues.choices import ChangeAction, PolicyKind


class PolicyChange(models.Model):
    """One saved change to the policy: who, when, and the object before and after.

    Written by the services in the same transaction as the change itself, so a
    change without its history (or the reverse) cannot exist. Append-only.
    """

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="policy_changes",
    )
    # Kept even if the user is deleted later.
    actor_username = models.CharField(max_length=150, blank=True)
    kind = models.CharField(max_length=32, choices=PolicyKind.choices, db_index=True)
    object_name = models.CharField(max_length=320, db_index=True)
    action = models.CharField(max_length=16, choices=ChangeAction.choices)
    # Team-private changes (membership) are visible to that team and admins only.
    team_slug = models.CharField(max_length=63, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    # Where a change came from when not typed in Berth, e.g. "imported from
    # cluster prod-a by alice" (``manage.py import_kueue``).
    note = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["kind", "object_name", "-at"])]

    def __str__(self) -> str:
        when = f"{self.at:%Y-%m-%d %H:%M}" if self.at else "unsaved"
        return f"{when} {self.actor_username} {self.action} {self.kind} {self.object_name}"

    @property
    def changed_fields(self) -> list[str]:
        """Top-level fields whose value differs between before and after."""
        before = self.before or {}
        after = self.after or {}
        return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
