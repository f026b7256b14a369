from __future__ import annotations

from django.apps import AppConfig


class QueuesConfig(AppConfig):
    name = "queues"
    verbose_name = "Queue policy"

    def ready(self) -> None:
        # Registers its Celery tasks in every process (web too): services
        # queue them by name (queues.deferred).
        from queues import tasks  # noqa: F401
