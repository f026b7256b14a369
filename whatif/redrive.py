"""Re-sending what-if runs and capacity plans that were stored but never
started: their task is queued after the commit, and a broker that was down
then (or a message lost with a worker) would leave them "queued" for ever.
A re-sent task that finds its run already claimed does nothing, so sending
twice is safe; waiting REDRIVE_AFTER first keeps the duplicates of a run that
merely waits behind a long one few.

And ending those that started but whose worker was lost (killed, or
restarted mid-run): a running run writes its progress every few seconds, so
one silent for STALLED_AFTER fails, saying so, and a shared-out run's parts
(a plan's replays) end with it and give back the space their inputs took. A worker that comes
back after all finds its run closed and changes nothing (compare-and-set)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from queues.deferred import send
from whatif.capacity import RUN_CAPACITY_PLAN
from whatif.models import CapacityPlan, WhatIfRun, WhatIfState
from whatif.plan_scaleout import end_replays
from whatif.runs import RUN_WHATIF
from whatif.scaleout import end_parts

log = logging.getLogger(__name__)
REDRIVE_AFTER = timedelta(minutes=5)
# The page warns after 10 minutes without progress; this is well past it.
STALLED_AFTER = timedelta(minutes=30)
STALLED = (
    "the worker replaying it stopped: no progress for {minutes} minutes (it was "
    "killed or restarted); ask again"
)


def redrive_queued(now: datetime | None = None) -> dict[str, int]:
    """Send again the task of every run and plan queued for longer than
    REDRIVE_AFTER; returns how many of each were sent."""
    before = (now or timezone.now()) - REDRIVE_AFTER
    sent = {"whatif_runs": 0, "capacity_plans": 0}
    for key, model, task in (
        ("whatif_runs", WhatIfRun, RUN_WHATIF),
        ("capacity_plans", CapacityPlan, RUN_CAPACITY_PLAN),
    ):
        stuck = model.objects.filter(state=WhatIfState.QUEUED, created_at__lt=before)
        for pk in stuck.values_list("pk", flat=True).order_by("created_at"):
            if send(task, pk, stored=f"{key} {pk}: still queued"):
                sent[key] += 1
    if any(sent.values()):
        log.info("re-sent queued what-if work: %s", sent)
    return sent


def end_stalled(now: datetime | None = None) -> dict[str, int]:
    """Fail every run and plan running without progress for STALLED_AFTER;
    returns how many of each were ended."""
    now = now or timezone.now()
    error = STALLED.format(minutes=int(STALLED_AFTER.total_seconds() // 60))
    ended = {"whatif_runs": 0, "capacity_plans": 0}
    for key, model in (("whatif_runs", WhatIfRun), ("capacity_plans", CapacityPlan)):
        stalled = model.objects.filter(
            state=WhatIfState.RUNNING, heartbeat_at__lt=now - STALLED_AFTER
        )
        for pk in stalled.values_list("pk", flat=True):
            # Together: a run marked failed is never left with parts to claim.
            with transaction.atomic():
                closed = model.objects.filter(
                    pk=pk, state=WhatIfState.RUNNING, heartbeat_at__lt=now - STALLED_AFTER
                ).update(state=WhatIfState.FAILED, finished_at=now, error=error)
                if closed and model is WhatIfRun:
                    end_parts(pk)
                elif closed:
                    end_replays(pk)
            ended[key] += closed
    if any(ended.values()):
        log.warning("ended what-if work whose worker was lost: %s", ended)
    return ended
