"""Writes for tokens and the access log."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.http import HttpRequest
from django.utils import timezone

from accounts.models import AccessDenial, ApiToken

TOKEN_PREFIX = "berth_"
# Writing last_used_at on every request would turn every read into a write.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    secret: str


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def create_token(
    *, user: Any, name: str, expires_in_days: int | None = None, parent: ApiToken | None = None
) -> IssuedToken:
    """Issue a token for ``user``. The secret is returned once and never stored.

    A token created with another token (``parent``) expires no later than it
    and is revoked with it: a leaked token cannot mint one that outlives it."""
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    expires_at = timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None
    if parent is not None and parent.expires_at is not None:
        expires_at = min(expires_at or parent.expires_at, parent.expires_at)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        parent=parent,
        prefix=secret[: len(TOKEN_PREFIX) + 6],
        digest=digest(secret),
        expires_at=expires_at,
    )
    return IssuedToken(token=token, secret=secret)


def revoke_token(token: ApiToken) -> bool:
    """Revoke once, with every live token created from it, and theirs;
    returns False if it was already revoked (compare-and-set)."""
    now = timezone.now()
    revoked = bool(
        ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=now)
    )
    generation = [token.pk]
    while generation:
        generation = list(
            ApiToken.objects.filter(parent_id__in=generation).values_list("pk", flat=True)
        )
        ApiToken.objects.filter(pk__in=generation, revoked_at__isnull=True).update(revoked_at=now)
    return revoked


def find_active_token(secret: str, now: datetime | None = None) -> ApiToken | None:
    """The live token with this secret, or None if unknown, revoked or expired."""
    now = now or timezone.now()
    token = (
        ApiToken.objects.select_related("user")
        .filter(digest=digest(secret), revoked_at__isnull=True)
        .first()
    )
    if token is None or (token.expires_at is not None and token.expires_at <= now):
        return None
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token


def record_access_denial(
    request: HttpRequest | None,
    *,
    reason: str,
    username: str = "",
    detail: str = "",
    user: Any = None,
) -> AccessDenial:
    """Log a refused attempt (who, what, when, from where).

    Requests are not wrapped in a transaction (no ATOMIC_REQUESTS), so the record
    is committed even though the request itself is refused."""
    if user is None and request is not None:
        candidate = getattr(request, "user", None)
        if candidate is not None and candidate.is_authenticated:
            user = candidate
    if user is not None and not username:
        username = user.get_username()
    return AccessDenial.objects.create(
        user=user,
        username=username[:150],
        reason=reason,
        method=(request.method or "") if request is not None else "",
        path=request.get_full_path()[:500] if request is not None else "",
        detail=detail[:500],
        remote_addr=client_address(request),
    )


def client_address(request: HttpRequest | None) -> str | None:
    if request is None:
        return None
    address = request.META.get("REMOTE_ADDR") or None
    return address if isinstance(address, str) else None


def prune_access_denials(*, older_than_days: int, batch_size: int = 5000) -> int:
    """Delete access-log rows older than the retention window; returns how many.

    Deletes in batches so a large backlog never holds one long lock."""
    cutoff = timezone.now() - timedelta(days=older_than_days)
    deleted_total = 0
    while True:
        ids = list(
            AccessDenial.objects.filter(at__lt=cutoff).values_list("pk", flat=True)[:batch_size]
        )
        if not ids:
            return deleted_total
        deleted, _ = AccessDenial.objects.filter(pk__in=ids).delete()
        deleted_total += deleted
