"""Make the cluster hold the policy (or, with --plan, show what that would change)."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from queues.backends import get_backend
from queues.backends.base import BackendError
from queues.models import ReconcileRun
from queues.reconcile import reconcile


class Command(BaseCommand):
    help = "Reconcile the policy into Kueue objects on the cluster (BERTH_CLUSTER)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--plan", action="store_true", help="show the per-object changes without applying them"
        )
        parser.add_argument("--json", action="store_true", help="print the run as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            backend = get_backend()
        except BackendError as exc:
            raise CommandError(str(exc)) from exc
        run = reconcile(
            backend,
            trigger=ReconcileRun.Trigger.PLAN if options["plan"] else ReconcileRun.Trigger.MANUAL,
            dry_run=options["plan"],
        )
        if options["json"]:
            self.stdout.write(
                json.dumps(
                    {
                        "status": run.status,
                        "message": run.message,
                        "created": run.created,
                        "updated": run.updated,
                        "deleted": run.deleted,
                        "drained": run.drained,
                        "unchanged": run.unchanged,
                        "drifted": run.drifted,
                        "write_calls": run.write_calls,
                        "changes": run.changes,
                        "errors": run.errors,
                    },
                    indent=2,
                )
            )
        else:
            self.stdout.write(f"{backend.name} cluster: {run.message}")
            for change in run.changes:
                where = f"{change['namespace']}/" if change.get("namespace") else ""
                detail = f" ({', '.join(change['fields'])})" if change.get("fields") else ""
                note = f" — {change['note']}" if change.get("note") else ""
                drift = " [drift]" if change.get("drift") else ""
                self.stdout.write(
                    f"  {change['action']:<9} {change['kind']} {where}"
                    f"{change['name']}{detail}{drift}{note}"
                )
            for error in run.errors:
                self.stdout.write(
                    self.style.ERROR(
                        f"  error     {error['kind']} {error['name']}: {error['message']}"
                    )
                )
            if not options["plan"]:
                self.stdout.write(
                    f"{run.created} created, {run.updated} updated, "
                    f"{run.deleted} deleted, {run.drained} draining, "
                    f"{run.unchanged} unchanged; {run.write_calls} write call(s)"
                )
        if run.status == ReconcileRun.Status.FAILED:
            raise CommandError(run.message)
