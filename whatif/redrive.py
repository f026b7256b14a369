"""Re-sending what-if runs and capacity plans that were stored but never
started: their task is queued after the commit, and a broker that was down
then (or a message lost with a worker) would leave them "queued" for ever.
A re-sent task that finds its run already claimed does nothing, so sending
twice is safe; waiting REDRIVE_AFTER first keeps the duplicates of a run that
merely waits behind a long one few."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.utils import timezone

from queues.deferred import send
from whatif.capacity import RUN_CAPACITY_PLAN
from whatif.models import CapacityPlan, WhatIfRun, WhatIfState
from whatif.runs import RUN_WHATIF

log = logging.getLogger(__name__)
REDRIVE_AFTER = timedelta(minutes=5)


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
