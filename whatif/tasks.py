"""The what-if Celery task. Its name keeps the ``jobs.tasks.`` prefix it had
before ``jobs/`` was split, so messages queued under it still find it."""

from __future__ import annotations

import logging

from celery import shared_task

from whatif.capacity import execute_plan
from whatif.plan_scaleout import replay_task as replay_plan_task
from whatif.redrive import end_stalled, redrive_queued
from whatif.scaleout import replay_task
from whatif.service import execute as execute_whatif

log = logging.getLogger(__name__)


@shared_task(name="jobs.tasks.run_whatif", acks_late=True)
def run_whatif(run_id: int) -> str:
    """Replay a what-if run's workloads under today's policy and the proposal;
    a run already claimed (a redelivery) is left alone."""
    return execute_whatif(run_id)


@shared_task(name="whatif.tasks.run_capacity_plan", acks_late=True)
def run_capacity_plan(plan_id: int) -> str:
    """Search a capacity plan's answers; a plan already claimed (a
    redelivery) is left alone."""
    return execute_plan(plan_id)


@shared_task(name="whatif.tasks.redrive_queued", acks_late=True)
def redrive_queued_work() -> dict[str, dict[str, int]]:
    """Every few minutes: re-send what-if runs and capacity plans stored but
    never started (their task was lost), and end those whose worker was lost
    mid-run."""
    done: dict[str, dict[str, int]] = {}
    for name, sweep in (("sent", redrive_queued), ("ended", end_stalled)):
        try:  # one failing does not keep the other from running
            done[name] = sweep()
        except Exception:
            log.exception("what-if sweep %r failed; the next one tries again", name)
    return done


@shared_task(name="whatif.tasks.replay_part", acks_late=True)
def replay_part(part_id: int) -> str:
    """Replay one part of a what-if run shared out among the workers; a part
    already claimed (by another worker, or the run itself) is left alone."""
    return replay_task(part_id)


@shared_task(name="whatif.tasks.replay_plan_point", acks_late=True)
def replay_plan_point(replay_id: int) -> str:
    """Replay one point (flavor, GPUs, seed) of a capacity plan's search shared
    out among the workers; one already claimed is left alone."""
    return replay_plan_task(replay_id)
