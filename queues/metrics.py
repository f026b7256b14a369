"""The policy app's figures for ``/metrics``: reconcile health (the newest
run, its errors, the last success), the drift reconcile put back, and the
policy versions in Postgres and on the cluster (5 queries, each on an index or
a small table)."""

from __future__ import annotations

from collections.abc import Iterator

from queues.metric_families import Family, counter, gauge, timestamp
from queues.models import DriftRecord, ReconcileRun
from queues.reconcile import applied_policy_version, policy_version

# The states the newest run can be in: dry runs (plans) and runs skipped because
# another was running did nothing to the cluster and are left out.
RUN_STATUSES = (
    ReconcileRun.Status.RUNNING,
    ReconcileRun.Status.SUCCEEDED,
    ReconcileRun.Status.PARTIAL,
    ReconcileRun.Status.FAILED,
)


def reconcile_metrics() -> list[Family]:
    """Reconcile health and policy versions (5 queries, each on an index or a
    small table)."""
    last_run = gauge(
        "berth_reconcile_last_run_timestamp_seconds",
        "When the newest reconcile run started (dry runs and skipped runs left out).",
    )
    last_success = gauge(
        "berth_reconcile_last_success_timestamp_seconds",
        "When the newest fully successful reconcile run finished.",
    )
    last_status = gauge(
        "berth_reconcile_last_status",
        "1 for the status of the newest reconcile run, 0 for the others.",
    )
    errors = gauge(
        "berth_reconcile_errors",
        "Objects the cluster refused in the newest reconcile run.",
    )
    drift = counter(
        "berth_reconcile_drift_total",
        "Hand edits on the cluster that reconcile found and put back (stored drift records).",
    )
    version = gauge(
        "berth_policy_version",
        "The newest policy change id in Postgres.",
    )
    applied = gauge(
        "berth_applied_policy_version",
        "The policy version the newest successful or partial apply rendered; -1 if none. "
        "Below berth_policy_version while a change waits to reach the cluster.",
    )
    runs = ReconcileRun.objects.filter(dry_run=False).order_by("-pk")
    newest = runs.filter(status__in=RUN_STATUSES).values("status", "started_at", "errors").first()
    if newest is not None:
        if (started := timestamp(newest["started_at"])) is not None:
            last_run.add(started)
        for status in RUN_STATUSES:
            last_status.add(int(newest["status"] == status), {"status": status.value})
        errors.add(len(newest["errors"] or []))
    succeeded = (
        runs.filter(status=ReconcileRun.Status.SUCCEEDED, finished_at__isnull=False)
        .values_list("finished_at", flat=True)
        .first()
    )
    if (finished := timestamp(succeeded)) is not None:
        last_success.add(finished)
    drift.add(DriftRecord.objects.count())
    version.add(policy_version())
    applied.add(applied_policy_version())
    return [last_run, last_success, last_status, errors, drift, version, applied]


class ReconcileCollector:
    def collect(self) -> Iterator[Family]:
        yield from reconcile_metrics()
