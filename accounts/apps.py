from __future__ import annotations

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts, tokens and access log"

    def ready(self) -> None:
        from accounts import signals  # noqa: F401  (connects the login-failure receiver)
