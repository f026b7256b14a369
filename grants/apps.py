from __future__ import annotations

from django.apps import AppConfig


class GrantsConfig(AppConfig):
    """Expiring quota grants: requests, decisions, application and revert."""

    name = "grants"
    verbose_name = "Quota grants"

    def ready(self) -> None:
        # Registers the revert sweep in every process: beat names it.
        from grants import tasks  # noqa: F401
