"""The approval controller at the size of a busy cluster.

Builds TEAMS teams (bench/org.py: a queue per team class plus the shared
urgent-release queue), RUNNING admitted workloads spread over the team queues
and URGENT urgent-release workloads holding quota with ``berth-approval``
Pending, as sync would have recorded them, and times:

- the controller pass that raises every request (impact preview from the
  engine per request, one engine view of the cluster per pass, e-mail to the
  approvers through Django's in-memory backend);
- a pass with nothing new (the steady state, every BERTH_APPROVAL_INTERVAL s);
- each decision (compare-and-set plus audit);
- the pass that expires every undecided request at its deadline.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/approvals.py

It creates a scratch database ``berth_bench_<pid>`` and drops it at the end.
Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import timedelta
from typing import Any

from org import TEAM_CLASSES, build_org, timed, with_scratch_database
from policy import summary

GPU = "nvidia.com/gpu"


def build(running: int, urgent: int) -> Any:
    """The workload records; returns the approver user."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.utils import timezone

    from cluster.models import WorkloadRecord
    from queues.models import Team

    now = timezone.now()
    teams = list(Team.objects.order_by("slug"))
    rows = []
    print(f"recording {running} running and {urgent} urgent workloads ...", flush=True)
    for index in range(running):
        team = teams[index % len(teams)]
        queue_class = TEAM_CLASSES[(index // len(teams)) % len(TEAM_CLASSES)]
        started = now - timedelta(minutes=5 + index % 600)
        rows.append(
            WorkloadRecord(
                uid=f"run-{index}",
                namespace=team.slug,
                name=f"run-{index}",
                team=team,
                cluster_queue=f"{team.slug}-{queue_class}",
                local_queue=f"{team.slug}-{queue_class}",
                priority=index % 3 * 1000,
                requested={GPU: 1},
                pod_sets=[{"name": "main", "count": 1, "requests": {GPU: 1}}],
                flavors={"main": {GPU: "h100-ondemand"}},
                state="admitted",
                created_at=started,
                admitted_at=started,
            )
        )
    for index in range(urgent):
        team = teams[index % len(teams)]
        rows.append(
            WorkloadRecord(
                uid=f"urgent-{index}",
                namespace=team.slug,
                name=f"urgent-{index}",
                team=team,
                cluster_queue="urgent-release",
                local_queue="urgent-release",
                priority=100000,
                requested={GPU: 1},
                pod_sets=[{"name": "main", "count": 1, "requests": {GPU: 1}}],
                flavors={"main": {GPU: "h100-ondemand"}},
                admission_checks={
                    "berth-approval": {
                        "state": "Pending",
                        "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                        "message": "",
                    }
                },
                state="quota-reserved",
                created_at=now,
                reserved_at=now,
            )
        )
    WorkloadRecord.objects.bulk_create(rows, batch_size=2000)
    approver = get_user_model().objects.create_user("approver", email="approver@example.com")
    Group.objects.get_or_create(name="approvers")[0].user_set.add(approver)
    return approver


def run(teams: int, running: int, urgent: int) -> None:
    from django.conf import settings
    from django.core import mail
    from django.utils import timezone

    from approvals.controller import drive_approvals
    from approvals.decide import decide
    from approvals.models import ApprovalRequest
    from queues.backends.simulated import SimulatedBackend

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    mail.outbox = []
    build_org(teams)
    approver = build(running, urgent)
    backend = SimulatedBackend()

    started = time.perf_counter()
    result = drive_approvals(backend)
    raised_in = time.perf_counter() - started
    print(
        f"{'first pass: raise, preview, notify':<44} {result['raised']} requests in "
        f"{raised_in:.2f} s ({raised_in / max(1, result['raised']) * 1000:.1f} ms each), "
        f"{len(mail.outbox)} e-mails"
    )
    steady = [timed(lambda: drive_approvals(backend)) for _ in range(5)]
    print(summary("steady pass (nothing new)", steady))

    pending = list(ApprovalRequest.objects.order_by("pk").values_list("pk", flat=True))
    half = pending[: len(pending) // 2]
    decisions = [
        timed(lambda pk=pk: decide(approver, pk, approve=True, comment="bench")) for pk in half
    ]
    print(summary("decide (CAS + audit + queue apply)", decisions))

    deadline = timezone.now() + timedelta(seconds=settings.BERTH_APPROVAL_TIMEOUT + 1)
    started = time.perf_counter()
    result = drive_approvals(backend, now=deadline)
    took = time.perf_counter() - started
    # Embedded Celery runs each expiry's apply task on commit, inside the pass.
    written = ApprovalRequest.objects.filter(state="expired", applied_at__isnull=False).count()
    print(
        f"{'expiry pass':<44} {result['expired']} expired, {written} closed by the apply "
        f"task (no Workload here: marked gone), in {took:.2f} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teams", type=int, default=50)
    parser.add_argument("--running", type=int, default=5000)
    parser.add_argument("--urgent", type=int, default=50)
    options = parser.parse_args()
    os.environ.setdefault("BERTH_RECONCILE_ON_CHANGE", "false")
    os.environ.setdefault("BERTH_LOG_LEVEL", "warning")
    return with_scratch_database(
        "bench/approvals.py", lambda: run(options.teams, options.running, options.urgent)
    )


if __name__ == "__main__":
    sys.exit(main())
