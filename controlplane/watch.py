"""``python -m controlplane.watch --heartbeat-file PATH``: the workload watch of
``manage.py sync_watch`` (the same ``jobs.sync.watch_workloads``), with a
heartbeat for the pod's probes (see ``controlplane.heartbeat``).

The watch's realistic failure is a stream that hangs (a connection that died
without a FIN): the process lives on and nothing arrives. Beats come from the
watch itself: when a list or a watch request starts, with every event (the API
server also sends a bookmark about once a minute) and when a request ends, which
the server does after ``--timeout`` seconds. So a healthy watch beats at least
every ``--timeout`` seconds, however quiet the cluster.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from controlplane.heartbeat import forget, touch

if TYPE_CHECKING:
    from queues.backends.base import ClusterBackend, WatchEvent

log = logging.getLogger("controlplane.watch")


class Beating:
    """A cluster backend that touches the heartbeat as the watch hears from the
    cluster; everything else goes to the backend unchanged."""

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


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m controlplane.watch",
        description="Watch Workloads into PostgreSQL (as manage.py sync_watch), "
        "touching a heartbeat file as the watch makes progress.",
    )
    parser.add_argument("--heartbeat-file", type=Path, required=True)
    parser.add_argument(
        "--timeout", type=int, default=60, help="seconds per watch request (default 60)"
    )
    parser.add_argument("--rounds", type=int, default=None, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()
    from jobs.sync import watch_workloads
    from queues.backends import get_backend

    forget(options.heartbeat_file)
    backend = get_backend()
    log.info("watching Workloads on the %s cluster", backend.name)
    beating = cast("ClusterBackend", Beating(backend, options.heartbeat_file))
    applied = watch_workloads(beating, timeout_seconds=options.timeout, rounds=options.rounds)
    log.info("%d workload event(s) applied", applied)


if __name__ == "__main__":
    main()
