"""`make run`: the web server plus, with no broker configured, the embedded
loop that does the workers' periodic work (reconcile, simulated cluster, sync)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from controlplane.embedded import EmbeddedLoop


class Command(BaseCommand):
    help = (
        "Serve Berth on ADDRPORT (default 127.0.0.1:8000) with the embedded loop: "
        "reconcile, the simulated cluster and sync, every BERTH_SIMULATED_TICK_MS."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")

    def handle(self, *args: Any, **options: Any) -> None:
        loop = None
        if settings.CELERY_EMBEDDED:
            loop = EmbeddedLoop()
            loop.start()
            self.stdout.write(
                f"Embedded loop running: cluster {settings.BERTH_CLUSTER}, a step every "
                f"{settings.BERTH_SIMULATED_TICK:g} s"
                + (
                    f", jobs working {settings.BERTH_SIMULATED_SPEEDUP:g}x real time"
                    if settings.BERTH_CLUSTER == "simulated"
                    else ""
                )
            )
        else:
            self.stdout.write(
                "A broker is configured: Celery beat and workers do the periodic work "
                "(make worker, make beat); serving the web app only."
            )
        try:
            # The reloader would fork a second process with its own loop.
            call_command("runserver", options["addrport"], use_reloader=False)
        finally:
            if loop is not None:
                loop.stop()
                loop.join(timeout=10)
