from __future__ import annotations

from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """A personal API token for scripts and the CLI.

    Only a SHA-256 digest is stored; the token itself is shown once, when it is
    created. Revoking keeps the row so the access log still names it.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    # The token this one was created with, if any: it never outlives it, and
    # revoking it revokes this one (accounts.services).
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    prefix = models.CharField(max_length=16, help_text="First characters, to recognise a token")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.user} / {self.name} ({self.prefix}…)"


class AccessDenial(models.Model):
    """A refused attempt: failed authentication or a forbidden action.

    Append-only; pruned after ``BERTH_AUDIT_RETENTION_DAYS`` by a periodic task.
    """

    class Reason(models.TextChoices):
        NOT_AUTHENTICATED = "not-authenticated"
        BAD_CREDENTIALS = "bad-credentials"
        FORBIDDEN = "forbidden"
        LOGIN_FAILED = "login-failed"
        LOCKED_OUT = "locked-out"

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="access_denials",
    )
    username = models.CharField(max_length=150, blank=True, help_text="As given, even if unknown")
    reason = models.CharField(max_length=32, choices=Reason.choices)
    method = models.CharField(max_length=10, blank=True)
    path = models.CharField(max_length=500, blank=True)
    detail = models.CharField(max_length=500, blank=True)
    remote_addr = models.GenericIPAddressField(null=True, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        # The token lockout counts an address's recent refusals (accounts/lockout.py).
        indexes = [models.Index(fields=["remote_addr", "reason", "at"])]

    def __str__(self) -> str:
        who = self.username or "anonymous"
        return f"{self.at:%Y-%m-%d %H:%M:%S} {who} {self.reason} {self.method} {self.path}"


class LockoutRelease(models.Model):
    """An admin unlocked an address's API-token lockout: refusals before this
    no longer count (accounts/lockout.py)."""

    remote_addr = models.GenericIPAddressField()
    at = models.DateTimeField(auto_now_add=True)
    released_by = models.CharField(max_length=150, blank=True)

    class Meta:
        indexes = [models.Index(fields=["remote_addr", "at"])]

    def __str__(self) -> str:
        return f"{self.remote_addr} unlocked at {self.at:%Y-%m-%d %H:%M:%S}"


class SingleSignOnIdentity(models.Model):
    """The identity provider's person (issuer and subject) a Berth user signs in
    as (accounts/sso.py). Linked at the first sign-in, by username; after that the
    subject, not the username, finds the user, so a renamed or reused username at
    the provider never reaches another person's account."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identity"
    )
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    # What the provider said at the last sign-in, to tell why someone has a role.
    groups = models.JSONField(default=list, blank=True)
    linked_at = models.DateTimeField(auto_now_add=True)
    last_sign_in_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "single sign-on identity"
        verbose_name_plural = "single sign-on identities"
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="unique_sso_subject")
        ]

    def __str__(self) -> str:
        return f"{self.user} = {self.subject} at {self.issuer}"
