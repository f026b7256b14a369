"""A capacity plan's replays shared out among the Celery workers.

The search asks for one replay at a time, each depending on the last, so
its replays are shared out whole, not split: while the search waits for a
replay, the workers replay those it may ask for next
(``queues.engine.capacity_lookahead``), as many at once as there are
workers. Each is a ``PlanReplay`` row; the plan's task sends a
``replay_plan_point`` task per row and claims rows itself while it waits,
the one it waits for first, so one worker is enough. Claims are
compare-and-set on a token, and a row whose worker has not beaten for
``STALE_AFTER`` is taken over (``whatif.sharing``). A replay queued ahead
that the search no longer needs is dropped before anyone starts it.

The search is given each replay's own figures, whoever replayed it: its
answers, curve and replay count are those of the search run in one process.
The search's request (policy, the stream pickled, targets) is stored with
the plan, signed, while its replays run; workers keep the last plan's
request they unpickled, so each replay does not unpickle it again (nor keep
it once the plan is over).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError
from django.db.models.functions import Now
from django.utils import timezone

from queues.deferred import send
from queues.engine.capacity_lookahead import next_points
from queues.engine.capacity_search import Figures, FrozenStream, Point, Request, Search
from whatif.models import CapacityPlan, PlanReplay, ReplayPartState, WhatIfState
from whatif.proposal import ALIVE_EVERY_SECONDS
from whatif.sharing import (
    BEAT_SECONDS,
    POLL_SECONDS,
    Unsigned,
    seal,
    unattended,
    unseal,
)
from whatif.sharing import claim as take

log = logging.getLogger(__name__)

REPLAY_PLAN_POINT = "whatif.tasks.replay_plan_point"
SALT = "whatif.plan_scaleout.CapacityPlan"
ENDED_WITH_THE_PLAN = "the plan ended before it was replayed"


class ReplayFailed(Exception):
    """A replay the search asked for failed: the plan cannot be answered."""


class _ClaimLost(Exception):
    """The replay was taken over (or its plan is over): stop replaying it."""


class _NotTheReplays(Exception):
    """A beat failed (its ``__cause__``): the database, or the plan's own look."""


class PlanEnded(Exception):
    """The plan was closed while its search ran (its task was taken for lost)."""


# The last plan's request a worker unpickled, by (plan, signature): a worker
# replays many points of one plan, and unpickling the stream is much of a
# small replay's cost.
_read: dict[tuple[int, str], Request] = {}


def _request_of(plan_id: int) -> Request | None:
    stored = (
        CapacityPlan.objects.filter(pk=plan_id, state=WhatIfState.RUNNING)
        .values_list("replay_inputs", "inputs_signature")
        .first()
    )
    if stored is None or not stored[1]:
        _read.clear()  # the plan is over: its stream need not stay in memory
        return None
    key = (plan_id, stored[1])
    if key not in _read:
        _read.clear()
        _read[key] = unseal(bytes(stored[0]), stored[1], SALT, str(plan_id), "capacity plan")
    return _read[key]


def claim(replay_id: int) -> str | None:
    """Take a queued replay, or one whose worker fell silent; its new token."""
    return take(PlanReplay.objects.filter(pk=replay_id))


def run_replay(
    replay_id: int,
    token: str,
    request: Request | None = None,
    between: Callable[[], None] | None = None,
) -> str:
    """Replay a claimed point of a plan and store its figures; ``request``
    is the plan's (read from the plan when not given), ``between`` runs at
    every beat (the plan's own task keeping its plan alive). Returns
    ``done``, ``failed`` (the replay itself failed, or its inputs were
    refused), ``released`` (it could not be read or beat: queued again, for
    any worker) or ``taken over``. An error of ``between`` is the caller's:
    the replay is queued again and the error raised."""
    mine = PlanReplay.objects.filter(pk=replay_id, token=token)
    point = mine.values_list("plan_id", "flavor", "gpus", "seed").first()
    if point is None:
        return "taken over"
    plan_id, flavor, gpus, seed = point
    started = time.monotonic()
    last_beat = [-BEAT_SECONDS]  # the first beat looks: a replay of an ended plan stops at once

    def beat() -> None:
        try:
            if between is not None:
                between()
            now = time.monotonic()
            if now - last_beat[0] < BEAT_SECONDS:
                return
            last_beat[0] = now
            # Only while the plan runs: a plan that ended frees its workers.
            live = mine.filter(state=ReplayPartState.RUNNING, plan__state=WhatIfState.RUNNING)
            updated = live.update(heartbeat_at=Now())
        except Exception as exc:
            raise _NotTheReplays from exc
        if not updated:
            raise _ClaimLost

    def end(state: ReplayPartState, **fields: Any) -> int:
        return mine.filter(state=ReplayPartState.RUNNING).update(state=state, **fields)

    try:
        request = request or _request_of(plan_id)
        if request is None:  # the plan ended, or its inputs were dropped with it
            return "taken over"
        figures = Search(request).replay(flavor, gpus, seed, beat=beat)
    except _ClaimLost:
        return "taken over"
    except Unsigned as exc:  # refused: no worker could replay it
        end(ReplayPartState.FAILED, error=f"Unsigned: {exc}", finished_at=timezone.now())
        return "failed"
    except _NotTheReplays as failed:
        # Not the replay's fault (the database, or the plan's own look while it
        # waits): queued again, so a worker, or this one later, replays it.
        end(ReplayPartState.QUEUED, token="")
        cause = failed.__cause__
        if between is not None and cause is not None:
            raise cause from None
        log.warning("capacity plan %s: replay of %s at %s GPUs released", plan_id, flavor, gpus)
        return "released"
    except DatabaseError:
        log.warning("capacity plan %s: could not read its inputs; released", plan_id, exc_info=True)
        end(ReplayPartState.QUEUED, token="")
        return "released"
    except Exception as exc:  # the replay itself failed: one process would fail the same way
        log.exception("capacity plan %s: replay of %s at %s GPUs failed", plan_id, flavor, gpus)
        error = f"{type(exc).__name__}: {exc}"
        end(ReplayPartState.FAILED, error=error, finished_at=timezone.now())
        return "failed"
    finished = end(
        ReplayPartState.DONE,
        figures=figures,
        seconds=time.monotonic() - started,
        finished_at=timezone.now(),
    )
    return "done" if finished else "taken over"


def replay_task(replay_id: int) -> str:
    """The ``replay_plan_point`` task: claim the replay unless taken, and replay it."""
    token = claim(replay_id)
    if token is None:
        return "skipped"
    return run_replay(replay_id, token)


def frozen(request: Request) -> Request:
    """The request with its stream pickled (``FrozenStream``): a worker
    replays what the plan's task read, not the database as it is by then."""
    if isinstance(request.load.build, FrozenStream):
        return request
    load = dataclasses.replace(request.load, build=FrozenStream(request.load.build()))
    return dataclasses.replace(request, load=load)


class SharedReplays:
    """The search's replayer (``Search(replayer=...)``) for a plan whose
    replays are shared out among ``workers`` workers: it queues the replay
    asked for and those the search may ask for next, replays what no worker
    has taken, and answers with each replay's figures once done.

    It looks again whenever a replay ends, even while it replays one itself:
    what the search will ask next is found from every replay done so far,
    so the workers keep busy ahead of it, and a replay run ahead that can no
    longer be asked for (the search went the other way) is dropped, its
    worker stopping at its next beat."""

    def __init__(self, plan_id: int, request: Request, workers: int) -> None:
        self.plan_id = plan_id
        self.request = frozen(request)
        self.workers = max(1, workers)
        self.waiting: Point | None = None
        self.alive_at = self.looked_at = time.monotonic()
        blob, signature = seal(self.request, SALT, str(plan_id))
        CapacityPlan.objects.filter(pk=plan_id).update(
            replay_inputs=blob, inputs_signature=signature
        )

    def __call__(self, point: Point) -> Figures:
        self.waiting = point
        mine = PlanReplay.objects.filter(
            plan_id=self.plan_id, flavor=point[0], gpus=point[1], seed=point[2]
        )
        while True:
            if not CapacityPlan.objects.filter(pk=self.plan_id, state=WhatIfState.RUNNING).exists():
                raise PlanEnded(f"capacity plan {self.plan_id} was closed while it searched")
            done = self._done()
            if point in done:
                mine.update(asked=True)
                return done[point]
            failed = mine.filter(state=ReplayPartState.FAILED).values_list("error", flat=True)
            for error in failed:
                raise ReplayFailed(f"the replay of {point[0]} at {point[1]} GPUs failed: {error}")
            if not self._replay_one(self._look(done)):
                self.alive()
                time.sleep(POLL_SECONDS)

    def _done(self) -> dict[Point, Figures]:
        finished = PlanReplay.objects.filter(plan_id=self.plan_id, state=ReplayPartState.DONE)
        rows = finished.values_list("flavor", "gpus", "seed", "figures")
        return {(flavor, gpus, seed): figures for flavor, gpus, seed, figures in rows if figures}

    def _look(self, done: dict[Point, Figures] | None = None) -> list[Point]:
        """The replays wanted now, each queued once: the one the search waits
        for (unless done), then as many as there are workers, looking ahead
        from every replay done so far. Those queued or running ahead that are
        no longer wanted are dropped."""
        self.looked_at = time.monotonic()
        done = self._done() if done is None else done
        # Every replay the search was given stays done: it is in ``done``.
        wanted = next_points(self.request, done, self.workers)
        if self.waiting is not None and self.waiting not in done and self.waiting not in wanted:
            wanted = [self.waiting, *wanted]  # the search asks what it asks
        rows = PlanReplay.objects.filter(plan_id=self.plan_id)
        ahead = rows.filter(
            asked=False, state__in=[ReplayPartState.QUEUED, ReplayPartState.RUNNING]
        )
        unwanted = [
            pk
            for flavor, gpus, seed, pk in ahead.values_list("flavor", "gpus", "seed", "pk")
            if (flavor, gpus, seed) not in wanted
        ]
        if unwanted:
            ahead.filter(pk__in=unwanted).delete()
        stored = {(f, g, s) for f, g, s in rows.values_list("flavor", "gpus", "seed")}
        fresh = [
            PlanReplay(plan_id=self.plan_id, flavor=f, gpus=g, seed=s)
            for f, g, s in wanted
            if (f, g, s) not in stored
        ]
        # ignore_conflicts: a row stored a moment ago (only this plan's task
        # stores them, but a redelivered one may overlap) stays one.
        PlanReplay.objects.bulk_create(fresh, ignore_conflicts=True)
        new = {(r.flavor, r.gpus, r.seed) for r in fresh}
        queued = rows.filter(state=ReplayPartState.QUEUED)
        for flavor, gpus, seed, pk in queued.values_list("flavor", "gpus", "seed", "pk"):
            if (flavor, gpus, seed) in new:
                send(REPLAY_PLAN_POINT, pk, stored=f"capacity plan {self.plan_id}: stored")
        return wanted

    def _replay_one(self, wanted: list[Point]) -> bool:
        """Claim and replay here the first wanted replay no worker has taken;
        False when every one is taken or done."""
        rows = PlanReplay.objects.filter(unattended(), plan_id=self.plan_id)
        waiting = {
            (flavor, gpus, seed): pk
            for flavor, gpus, seed, pk in rows.values_list("flavor", "gpus", "seed", "pk")
        }
        for point in wanted:
            if point in waiting:
                token = claim(waiting[point])
                if token is not None:
                    run_replay(waiting[point], token, self.request, between=self._between)
                    return True
        return False

    def _between(self) -> None:
        """While this process replays: the plan's heartbeat, and a look at
        the others' replays (one may have ended, and the search moved on)."""
        self.alive()
        if time.monotonic() - self.looked_at >= POLL_SECONDS:
            self._look()

    def alive(self) -> None:
        """The plan's heartbeat while its search waits on replays, at least
        every ALIVE_EVERY_SECONDS (the stalled-run sweep reads it)."""
        now = time.monotonic()
        if now - self.alive_at >= ALIVE_EVERY_SECONDS:
            CapacityPlan.objects.filter(pk=self.plan_id, state=WhatIfState.RUNNING).update(
                heartbeat_at=timezone.now()
            )
            self.alive_at = now


def end_replays(plan_id: int) -> None:
    """The plan is over (answered, failed, or its own worker lost): its
    unfinished replays end, so a worker still replaying one stops at its
    next beat and none takes them up later; its stored request goes. Who
    replayed what, and for how long, stays."""
    PlanReplay.objects.filter(
        plan_id=plan_id, state__in=[ReplayPartState.QUEUED, ReplayPartState.RUNNING]
    ).update(state=ReplayPartState.FAILED, token="", error=ENDED_WITH_THE_PLAN)
    CapacityPlan.objects.filter(pk=plan_id).update(replay_inputs=b"", inputs_signature="")


def search_apart(
    plan_id: int,
    request: Request,
    workers: int,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """The plan's search, its replays shared out among ``workers`` workers."""
    try:
        return Search(request, progress, replayer=SharedReplays(plan_id, request, workers)).run()
    finally:
        end_replays(plan_id)


__all__ = [
    "REPLAY_PLAN_POINT",
    "PlanEnded",
    "ReplayFailed",
    "SharedReplays",
    "claim",
    "end_replays",
    "replay_task",
    "run_replay",
    "search_apart",
]
