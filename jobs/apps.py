from __future__ import annotations

from django.apps import AppConfig


class JobsConfig(AppConfig):
    """Job requests, workload tracking and approvals (built by later issues)."""

    name = "jobs"
    verbose_name = "Jobs"
