from __future__ import annotations

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts, tokens and access log"

    def ready(self) -> None:
        # Imported for their side effects: the login-failure and lockout
        # receivers and the OpenAPI description of token authentication.
        from accounts import lockout, schema, signals  # noqa: F401
