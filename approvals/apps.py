from __future__ import annotations

from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    """The berth-approval AdmissionCheck controller: requests, decisions and
    their audit trail."""

    name = "approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        # Registers its Celery tasks in every process (web too): services
        # queue them by name (queues.deferred).
        from approvals import tasks  # noqa: F401
