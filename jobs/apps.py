from __future__ import annotations

from django.apps import AppConfig


class JobsConfig(AppConfig):
    """Job requests: submission, manifests, validation, placement, lifecycle."""

    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        # Registers its Celery tasks in every process (web too): services
        # queue them by name (queues.deferred).
        from jobs import tasks  # noqa: F401
