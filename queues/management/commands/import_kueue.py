"""Import the Kueue policy a cluster (or a GitOps repository) already holds.

    manage.py import_kueue                      # plan, from the configured cluster
    manage.py import_kueue --from-files gitops/ # plan, from YAML files
    manage.py import_kueue --apply --as alice   # store it, then take the objects over

Without --apply nothing is stored and nothing is written.
"""

from __future__ import annotations

import getpass
import json
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from queues.backends import get_backend
from queues.backends.base import BackendError
from queues.kueue_import import (
    ImportReport,
    ImportSourceError,
    describe,
    import_kueue,
    objects_from_cluster,
    objects_from_files,
)
from queues.models import ReconcileRun
from queues.reconcile import configured_manual_steps, reconcile


def _pairs(values: list[str], option: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        queue, sep, queue_class = value.partition("=")
        if not sep or not queue:
            raise CommandError(f"{option} {value!r}: write QUEUE=CLASS (CLASS empty for none)")
        pairs[queue] = queue_class
    return pairs


class Command(BaseCommand):
    help = (
        "Import ResourceFlavors, Cohorts, ClusterQueues, LocalQueues, WorkloadPriorityClasses, "
        "Topologies and Berth's AdmissionCheck from the cluster (or YAML files) into Berth's "
        "policy. Prints the plan; --apply stores it and takes the objects over."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--from-files",
            nargs="+",
            metavar="PATH",
            help="read YAML files or folders (e.g. a GitOps repository) instead of the cluster",
        )
        parser.add_argument(
            "--apply", action="store_true", help="store the policy and take the objects over"
        )
        parser.add_argument(
            "--team-label",
            metavar="KEY",
            help="namespace label naming each namespace's team (default: each namespace "
            "holding a LocalQueue is a team of its own name)",
        )
        parser.add_argument(
            "--class",
            dest="classes",
            action="append",
            default=[],
            metavar="QUEUE=CLASS",
            help="the queue class of a ClusterQueue, over the guess from its name "
            "(CLASS empty for none); repeatable",
        )
        parser.add_argument(
            "--skip",
            action="append",
            default=[],
            metavar="KIND/NAME",
            help="leave an object out (Kind/name, or Kind/namespace/name); repeatable",
        )
        parser.add_argument(
            "--as",
            dest="username",
            metavar="USERNAME",
            help="the Berth user the history names (default: none, 'system')",
        )
        parser.add_argument(
            "--cluster-name", help="the cluster's name in the history (default: the backend's)"
        )
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        actor = None
        if options["username"]:
            actor = get_user_model().objects.filter(username=options["username"]).first()
            if actor is None:
                raise CommandError(f"--as {options['username']}: there is no such Berth user")
        who = options["username"] or f"{getpass.getuser()} (manage.py)"
        classes = _pairs(options["classes"], "--class")
        backend = None
        try:
            if options["from_files"]:
                objects = objects_from_files(options["from_files"])
                actual = None
                where = f"files {', '.join(options['from_files'])}"
            else:
                backend = get_backend()
                objects = objects_from_cluster(backend)
                actual = objects
                where = f"cluster {options['cluster_name'] or backend.name}"
        except ImportSourceError as exc:
            raise CommandError(str(exc)) from exc
        except BackendError as exc:
            raise CommandError(f"the cluster could not be read: {exc}") from exc
        report = import_kueue(
            objects,
            actor=actor,
            source=f"imported from {where} by {who}",
            apply=options["apply"],
            actual=actual,
            team_label=options["team_label"],
            classes=classes,
            skip=options["skip"],
            manual=configured_manual_steps(),
        )
        after = self._take_over(report, backend) if report.applied and backend else None
        if options["json"]:
            self.stdout.write(json.dumps(_as_json(report, after), indent=2, default=str))
        else:
            self.stdout.write("\n".join(describe(report)))
            if after is not None:
                self.stdout.write("\n".join(after["lines"]))
            elif report.applied:
                self.stdout.write(
                    "\nStored. The next reconcile of the configured cluster takes the objects over."
                )
            elif not report.errors:
                self.stdout.write("\nNothing was stored: run again with --apply to import.")
        if report.errors:
            raise CommandError(f"{len(report.errors)} object(s) cannot be imported; see above")

    def _take_over(self, report: ImportReport, backend: Any) -> dict[str, Any]:
        """Reconcile now (the takeover), then plan once more: it must write nothing."""
        run = reconcile(backend, trigger=ReconcileRun.Trigger.MANUAL)
        check = reconcile(backend, trigger=ReconcileRun.Trigger.PLAN, dry_run=True)
        writes = [
            c for c in check.changes if c["action"] in ("create", "update", "delete", "drain")
        ]
        lines = [
            "",
            f"Takeover: {run.message} ({run.write_calls} write call(s)).",
            f"A reconcile now: {len(writes)} change(s) planned"
            + (
                ": " + ", ".join(f"{c['action']} {c['kind']} {c['name']}" for c in writes)
                if writes
                else "."
            ),
        ]
        lines += [f"  error: {e['kind']} {e['name']}: {e['message']}" for e in run.errors]
        return {
            "takeover_status": run.status,
            "takeover_write_calls": run.write_calls,
            "takeover_errors": run.errors,
            "writes_after": writes,
            "lines": lines,
        }


def _as_json(report: ImportReport, after: dict[str, Any] | None) -> dict[str, Any]:
    policy = report.policy
    return {
        "source": report.source,
        "applied": report.applied,
        "errors": [e.__dict__ for e in report.errors],
        "stored": report.stored,
        "cluster_queues": policy.cluster_queues,
        "class_guesses": [g.__dict__ for g in policy.guesses],
        "dropped": [d.__dict__ for d in policy.dropped],
        "skipped": [s.__dict__ for s in policy.skipped],
        "takeover": [{**c.as_dict(), "managers": report.managers(c)} for c in report.takeover],
        **({k: v for k, v in after.items() if k != "lines"} if after else {}),
    }
