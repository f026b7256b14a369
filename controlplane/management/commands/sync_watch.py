"""A long-running watch of Workloads into Postgres, so the dashboard and the
API see admissions and preemptions within seconds rather than at the next
periodic sync. Resumes from the stored resourceVersion; relists on 410 Gone.

With ``--heartbeat-file`` it touches that file as the watch hears from the
cluster — when a list or a watch request starts and ends, and with every event
or bookmark — for a pod's probes (``controlplane.heartbeat``; deploy/base/
watch.yaml). The server ends each watch request after ``--timeout`` seconds, so
a healthy watch beats at least that often however quiet the cluster; a stream
hung on a dead connection stops beating."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from django.core.management.base import BaseCommand

from cluster.sync import watch_workloads
from controlplane.heartbeat import forget, touch
from queues.backends import get_backend
from queues.backends.base import ClusterBackend, WatchEvent


class Beating:
    """A cluster backend that touches the heartbeat as the watch makes progress;
    every other call goes to the backend unchanged."""

    def __init__(self, backend: ClusterBackend, heartbeat: Path) -> None:
        self._backend = backend
        self._heartbeat = heartbeat

    def list(self, *args: Any, **kwargs: Any) -> Any:
        touch(self._heartbeat)
        answer = self._backend.list(*args, **kwargs)
        touch(self._heartbeat)
        return answer

    def watch(self, *args: Any, **kwargs: Any) -> Iterator[WatchEvent]:
        touch(self._heartbeat)
        for event in self._backend.watch(*args, **kwargs):
            touch(self._heartbeat)
            yield event
        touch(self._heartbeat)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)


class Command(BaseCommand):
    help = "Watch Workloads on the cluster and keep WorkloadRecord/WorkloadEvent current."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--timeout", type=int, default=300, help="seconds per watch request (default 300)"
        )
        parser.add_argument(
            "--rounds", type=int, default=None, help="stop after this many watch requests"
        )
        parser.add_argument(
            "--heartbeat-file",
            type=Path,
            default=None,
            help="touch this file as the watch makes progress (for a pod's probes)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        backend = get_backend()
        heartbeat: Path | None = options["heartbeat_file"]
        if heartbeat is not None:
            forget(heartbeat)  # an emptyDir outlives a container restart
            backend = cast(ClusterBackend, Beating(backend, heartbeat))
        self.stdout.write(f"Watching Workloads on the {backend.name} cluster (Ctrl-C stops)")
        applied = watch_workloads(
            backend, timeout_seconds=options["timeout"], rounds=options["rounds"]
        )
        self.stdout.write(f"{applied} workload event(s) applied")
