from __future__ import annotations

from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    """The berth-approval AdmissionCheck controller: requests, decisions and
    their audit trail."""

    name = "approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        # Django's hook for start-up wiring, so these imports run once apps are
        # loaded: tasks register by name (services queue them so), and jobs,
        # below this app, learn of approvals without importing it.
        from approvals import history, job_section, lifecycle, tasks  # noqa: F401
        from jobs import follow, selectors
        from jobs.api import serializers

        follow.register_refusal_check(lifecycle.refused)
        selectors.register_timeline_source(history.job_timeline_steps)
        serializers.register_gate_view(job_section.latest_approval)
