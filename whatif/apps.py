from __future__ import annotations

from django.apps import AppConfig


class WhatIfConfig(AppConfig):
    """Replays of recorded load (or a scenario) under today's policy and a
    proposal."""

    name = "whatif"
    verbose_name = "What-if"

    def ready(self) -> None:
        # Registers its Celery tasks in every process (web too): services
        # queue them by name (queues.deferred).
        from whatif import tasks  # noqa: F401
