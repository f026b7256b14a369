from __future__ import annotations

from django.apps import AppConfig


class JobsConfig(AppConfig):
    """Job requests: submission, manifests, validation, placement, lifecycle."""

    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        # Django's hook for start-up wiring, so these imports run once apps are
        # loaded: tasks register by name (services queue them so), and the
        # cluster app, below this one, learns of jobs without importing it.
        from cluster import declared
        from cluster.models import SyncStepName
        from cluster.sync import register_watch_follower
        from cluster.sync_steps import register_step
        from jobs import follow, selectors, tasks  # noqa: F401

        declared.register(selectors.declared_runtimes)
        register_step(SyncStepName.JOBS, follow.sync_step)
        register_watch_follower(follow.follow_changed)
