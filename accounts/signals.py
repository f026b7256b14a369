from __future__ import annotations

from typing import Any

from django.contrib.auth.signals import user_login_failed
from django.dispatch import receiver
from django.http import HttpRequest

from accounts.models import AccessDenial
from accounts.services import record_access_denial


@receiver(user_login_failed)
def log_failed_login(
    sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any
) -> None:
    if "nonce" in credentials:
        # A single sign-on stopped by django-axes' lockout, which log_lockout
        # records; its other refusals are recorded by accounts.oidc.refuse.
        return
    record_access_denial(
        request,
        reason=AccessDenial.Reason.LOGIN_FAILED,
        username=str(credentials.get("username", ""))[:150],
        detail="wrong username or password",
    )
