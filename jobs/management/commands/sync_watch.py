"""A long-running watch of Workloads into Postgres, so the dashboard and the
API see admissions and preemptions within seconds rather than at the next
periodic sync. Resumes from the stored resourceVersion; relists on 410 Gone."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from jobs.sync import watch_workloads
from queues.backends import get_backend


class Command(BaseCommand):
    help = "Watch Workloads on the cluster and keep WorkloadRecord/WorkloadEvent current."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--timeout", type=int, default=300, help="seconds per watch request (default 300)"
        )
        parser.add_argument(
            "--rounds", type=int, default=None, help="stop after this many watch requests"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        backend = get_backend()
        self.stdout.write(f"Watching Workloads on the {backend.name} cluster (Ctrl-C stops)")
        applied = watch_workloads(
            backend, timeout_seconds=options["timeout"], rounds=options["rounds"]
        )
        self.stdout.write(f"{applied} workload event(s) applied")
