"""A what-if's replays shared out among the Celery workers.

The replays split into independent groups (``queues.engine.split``), dealt
into as many parts as there are workers (``queues.engine.parts``), stored as
``ReplayPart`` rows: the run's task sends one ``replay_part`` task per part
and then claims parts itself, so one worker is enough and none waits on
another. Claims are compare-and-set on a token; a part whose worker has not
beaten for ``STALE_AFTER`` is taken over, and the old worker stops at its next
beat. Every part's replays hand their figures over at the same milestones,
which the run merges into its figures so far; at the end it merges the
parts' results into the whole replays' (identical to one process's).

A part's inputs are engine objects, pickled and signed with the secret key:
a row changed by anything but Berth is refused, not unpickled.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from celery import current_app, current_task
from django.conf import settings
from django.db.models.functions import Now
from django.utils import timezone

from queues.deferred import send
from queues.engine.model import Policy, Workload
from queues.engine.parts import deal, milestones, replay_part
from queues.engine.replay_records import Frame, SimulationResult, WorkloadRecord, frame_of
from queues.engine.result_codec import from_json, to_json
from queues.engine.split import SERIES_KINDS, GroupReplay, group_replays, merge
from whatif.models import ReplayCheckpoint, ReplayPart, ReplayPartState, WhatIfRun, WhatIfState
from whatif.proposal import ALIVE_EVERY_SECONDS
from whatif.sharing import BEAT_SECONDS, POLL_SECONDS, seal, unattended, unseal
from whatif.sharing import claim as take

log = logging.getLogger(__name__)

REPLAY_PART = "whatif.tasks.replay_part"
SALT = "whatif.scaleout.ReplayPart"
# What an unfinished part of a run that ended says (the run page words it so).
ENDED_WITH_THE_RUN = "the run ended before it was replayed"

# What the run is shown at a milestone: the whole replays' frame, the
# milestone's time and the replays' figures there, by label.
SoFar = Callable[[Frame, float, dict[str, SimulationResult]], None]


class PartFailed(Exception):
    """A part's replay failed: the run cannot be answered."""


class _WatchFailed(Exception):
    """The run's own watch failed while it replayed a part: not the part's fault."""


class _ClaimLost(Exception):
    """The part was taken over (or its run is over): stop replaying it."""


def replay_workers() -> int:
    """How many parts to deal: one with no broker (tasks run here);
    ``BERTH_REPLAY_WORKERS``; else the processes of the worker nodes that
    answer (each node's pool size: a prefork node of 4 counts 4), this
    node counted once even when it is too busy to answer (a solo pool
    answers nothing while it runs a task)."""
    if current_app.conf.task_always_eager:  # tasks run here, one after another
        return 1
    if settings.BERTH_REPLAY_WORKERS:
        return int(settings.BERTH_REPLAY_WORKERS)
    try:
        stats = current_app.control.inspect(timeout=0.5).stats() or {}
    except Exception:  # no broker to ask: replay here
        log.warning("could not count the Celery workers; replaying in one part", exc_info=True)
        return 1
    processes = {name: _pool_size(info) for name, info in stats.items()}
    me = getattr(current_task.request, "hostname", None) if current_task else None
    if me and me not in processes:
        processes[me] = 1
    return max(1, sum(processes.values()))


def _pool_size(stats: Any) -> int:
    """The processes a node's ``inspect stats`` says its pool runs (1 if it
    does not say: a solo or threads pool it cannot tell)."""
    pool = stats.get("pool") if isinstance(stats, Mapping) else None
    size = pool.get("max-concurrency") if isinstance(pool, Mapping) else None
    return size if isinstance(size, int) and size > 0 else 1


def _seal(payload: Any, run_id: int, index: int) -> tuple[bytes, str]:
    return seal(payload, SALT, f"{run_id}:{index}")


def _unseal(blob: bytes, signature: str, run_id: int, index: int) -> Any:
    return unseal(blob, signature, SALT, f"{run_id}:{index}", "what-if")


def plan_parts(
    run_id: int,
    policies: Mapping[str, Policy],
    build: Callable[[], list[tuple[Workload, str]]],
    options: Mapping[str, Any],
    parts: int,
) -> tuple[Frame, list[ReplayPart]]:
    """Each policy's replay of ``build()`` split into groups and dealt into
    at most ``parts`` parts, stored queued. ``options`` are the simulator's
    (``start``, ``horizon``, ``context`` ...)."""
    replays: dict[tuple[str, str], GroupReplay] = {}
    frame: Frame | None = None
    for label, policy in policies.items():
        stream = build()
        if frame is None:
            frame = frame_of(
                (w for w, _ in stream), start=options.get("start"), horizon=options.get("horizon")
            )
        for group, replay in group_replays(policy, stream, **options).items():
            replays[(label, group)] = replay
    assert frame is not None, "no policy to replay"
    sizes: dict[str, int] = {}  # a group's workloads (the most any policy's replay has)
    costs: dict[str, int] = {}
    for (_, group), replay in replays.items():
        count = len(replay.workloads)
        sizes[group] = max(sizes.get(group, 0), count)
        # A tree's replay costs about the square of its workloads (every change
        # in it nominates its blocked heads again): parts are balanced on that.
        costs[group] = costs.get(group, 0) + count * count
    rows = []
    for index, groups in enumerate(deal(costs, parts)):
        mine = {key: replay for key, replay in replays.items() if key[1] in groups}
        blob, signature = _seal((frame, mine), run_id, index)
        rows.append(
            ReplayPart(
                run_id=run_id,
                index=index,
                groups=groups,
                workloads=sum(sizes[g] for g in groups),
                replays=blob,
                signature=signature,
            )
        )
    ReplayPart.objects.filter(run_id=run_id).delete()  # none yet: a run is claimed once
    return frame, ReplayPart.objects.bulk_create(rows)


def claim(part_id: int) -> str | None:
    """Take a queued part, or one whose worker fell silent; its new token."""
    return take(ReplayPart.objects.filter(pk=part_id), share=0.0)


def run_part(part_id: int, token: str, between: Callable[[], None] | None = None) -> str:
    """Replay a claimed part: beat, hand figures over at each milestone, and
    store the results; ``between`` runs after every slice of each of its
    replays (the run's own watch).
    Returns ``done``, ``failed`` or ``taken over``."""
    mine = ReplayPart.objects.filter(pk=part_id, token=token)
    stored = mine.values_list("replays", "signature", "run_id", "index").first()
    if stored is None:
        return "taken over"
    started = time.monotonic()
    last_beat = [-BEAT_SECONDS]  # the first slice beats: a part of an ended run stops at once

    def beat(share: float) -> None:
        if between is not None:
            try:
                between()
            except Exception as exc:
                raise _WatchFailed from exc
        now = time.monotonic()
        if now - last_beat[0] < BEAT_SECONDS:
            return
        last_beat[0] = now
        # Only while the run is running: a run whose task died frees its workers.
        if not mine.filter(run__state=WhatIfState.RUNNING).update(heartbeat_at=Now(), share=share):
            raise _ClaimLost

    # The records this part has handed over finished: they change no more.
    settled: dict[tuple[str, str], set[str]] = {}

    def hand_over(index: int, at: float, figures: dict[tuple[str, str], SimulationResult]) -> None:
        if not mine.filter(state=ReplayPartState.RUNNING).exists():
            raise _ClaimLost
        handed = {}
        for key, result in figures.items():
            done = settled.setdefault(key, set())
            fresh = {k: r for k, r in result.records.items() if k not in done}
            done.update(k for k, r in fresh.items() if r.finished is not None)
            handed[key] = _figures_only(result, fresh)
        ReplayCheckpoint.objects.bulk_create(
            [ReplayCheckpoint(part_id=part_id, milestone=index, at=at, figures=_by_label(handed))],
            ignore_conflicts=True,  # a part taken over hands the same figures over again
        )

    try:
        # (frame, replays); a part stored before milestones came from the frame
        # also holds them in between.
        frame, *_, replays = _unseal(bytes(stored[0]), *stored[1:])
        del stored  # its pickled workloads: the replays let theirs go as they finish
        results = replay_part(replays, frame, at_milestone=hand_over, between=beat)
    except _ClaimLost:
        return "taken over"
    except _WatchFailed as failed:  # another part failed, or the run's watch did
        assert failed.__cause__ is not None
        raise failed.__cause__ from None
    except Exception as exc:  # a part must end, whatever went wrong
        log.exception("replay part %s failed", part_id)
        mine.filter(state=ReplayPartState.RUNNING).update(
            state=ReplayPartState.FAILED,
            error=f"{type(exc).__name__}: {exc}",
            finished_at=timezone.now(),
        )
        return "failed"
    finished = mine.filter(state=ReplayPartState.RUNNING).update(
        state=ReplayPartState.DONE,
        result=_by_label(results),
        share=1.0,
        seconds=time.monotonic() - started,
        finished_at=timezone.now(),
    )
    return "done" if finished else "taken over"


def _figures_only(result: SimulationResult, records: dict[str, Any]) -> SimulationResult:
    """What figures so far need of a replay stopped at a milestone: its
    records new or changed since the last one (a finished record is handed
    over once), its usage and counts; not its charts or admission log, which
    only the answer shows."""
    series = {"t": [], "resource": result.series["resource"], **{k: {} for k in SERIES_KINDS}}
    return dataclasses.replace(result, records=records, series=series, admission_log=[])


def _by_label(results: Mapping[tuple[str, str], SimulationResult]) -> dict[str, Any]:
    out: dict[str, dict[str, Any]] = {}
    for (label, group), result in results.items():
        out.setdefault(label, {})[group] = to_json(result)
    return out


def replay_task(part_id: int) -> str:
    """The ``replay_part`` task: claim the part unless taken, and replay it."""
    token = claim(part_id)
    if token is None:
        return "skipped"
    return run_part(part_id, token)


class _Watch:
    """The run's view of its parts while they replay: progress, failures,
    and figures so far at the last milestone every part has handed over."""

    def __init__(
        self,
        run_id: int,
        frame: Frame,
        progress: Callable[[float], None] | None,
        so_far: SoFar | None,
        every: float,
    ) -> None:
        self.run_id = run_id
        self.frame = frame
        self.marks = milestones(frame)
        self.progress = progress
        self.so_far = so_far
        self.every = every
        self.shown = -1  # the last milestone shown
        self.looked = -float("inf")
        self.alive = -float("inf")
        self.last_reading = -float("inf")
        self.wait = every
        self.done = False
        # Every record handed over so far, by label and group (a milestone
        # hands over only those new or changed since the one before).
        self.records: dict[tuple[str, str], dict[str, WorkloadRecord]] = {}

    def __call__(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.looked < min(POLL_SECONDS, self.every):
            return
        self.looked = now
        parts = list(
            ReplayPart.objects.filter(run_id=self.run_id).values_list(
                "index", "state", "workloads", "share", "error"
            )
        )
        failed = [(i, error) for i, state, _, _, error in parts if state == ReplayPartState.FAILED]
        if failed:
            index, error = failed[0]
            raise PartFailed(f"part {index + 1} failed: {error}")
        self.done = bool(parts) and all(s == ReplayPartState.DONE for _, s, _, _, _ in parts)
        if now - self.alive >= ALIVE_EVERY_SECONDS:
            # A part taken over starts again from nothing and the run's progress
            # waits for it: the heartbeat tells the stalled-run sweep it is alive.
            WhatIfRun.objects.filter(pk=self.run_id, state=WhatIfState.RUNNING).update(
                heartbeat_at=timezone.now()
            )
            self.alive = now
        total = sum(workloads for _, _, workloads, _, _ in parts) or 1
        if self.progress is not None:
            self.progress(sum(w * share for _, _, w, share, _ in parts) / total)
        if self.so_far is not None and not self.done and now - self.last_reading >= self.wait:
            self._figures_so_far(len(parts))

    def _figures_so_far(self, parts: int) -> None:
        handed: dict[int, int] = {}
        checkpoints = ReplayCheckpoint.objects.filter(part__run_id=self.run_id)
        for milestone in checkpoints.values_list("milestone", flat=True):
            handed[milestone] = handed.get(milestone, 0) + 1
        ready = [m for m, count in handed.items() if count == parts and m > self.shown]
        if not ready:
            return
        began = time.monotonic()
        milestone = max(ready)
        latest: dict[tuple[str, str], SimulationResult] = {}
        unread = checkpoints.filter(milestone__gt=self.shown, milestone__lte=milestone)
        for figures in unread.order_by("milestone").values_list("figures", flat=True):
            for label, groups in figures.items():
                for group, data in groups.items():
                    result = from_json(data)
                    self.records.setdefault((label, group), {}).update(result.records)
                    latest[(label, group)] = result
        by_label: dict[str, dict[str, SimulationResult]] = {}
        for (label, group), result in latest.items():
            records = self.records[(label, group)]
            by_label.setdefault(label, {})[group] = dataclasses.replace(result, records=records)
        assert self.so_far is not None
        merged = {label: merge(groups) for label, groups in by_label.items()}
        self.so_far(self.frame, self.marks[milestone], merged)
        checkpoints.filter(milestone__lte=milestone).delete()
        self.shown = milestone
        self.last_reading = time.monotonic()
        # Reading costs the merge and the figures: never more than a fifth of the time.
        self.wait = max(self.every, 4 * (self.last_reading - began))


def replay_apart(
    run_id: int,
    policies: Mapping[str, Policy],
    build: Callable[[], list[tuple[Workload, str]]],
    options: Mapping[str, Any],
    parts: int,
    *,
    progress: Callable[[float], None] | None = None,
    so_far: SoFar | None = None,
    every: float = 2.0,
) -> tuple[Frame, dict[str, SimulationResult]]:
    """Each policy's replay of ``build()``, by label, replayed in parts by
    the workers and by this one, merged. ``progress`` gets the share done
    (0..1); ``so_far`` the frame, a milestone's time and the replays'
    figures there."""
    frame, rows = plan_parts(run_id, policies, build, options, parts)
    for row in rows:
        send(REPLAY_PART, row.pk, stored=f"what-if run {run_id} part {row.index}: stored")
    return frame, gather(run_id, frame, progress=progress, so_far=so_far, every=every)


def gather(
    run_id: int,
    frame: Frame,
    *,
    progress: Callable[[float], None] | None = None,
    so_far: SoFar | None = None,
    every: float = 2.0,
) -> dict[str, SimulationResult]:
    """Replay the run's parts no worker replays, watch the others, and merge
    them all once done (by label). Raises PartFailed if one fails."""
    watch = _Watch(run_id, frame, progress, so_far, every)
    try:
        while True:
            mine = _claim_any(run_id)
            if mine is not None:
                run_part(mine[0], mine[1], between=watch)
                continue
            watch(force=True)
            if watch.done:
                break
            time.sleep(POLL_SECONDS)
        return _merged(run_id)
    finally:
        end_parts(run_id)


def end_parts(run_id: int) -> None:
    """The run is over (done, failed, or its own worker lost): its parts end
    first, so a worker still replaying one stops at its next beat or
    milestone and none takes them up later; then their checkpoints, inputs
    and results go. Who replayed what, and for how long, stays."""
    ReplayPart.objects.filter(
        run_id=run_id, state__in=[ReplayPartState.QUEUED, ReplayPartState.RUNNING]
    ).update(state=ReplayPartState.FAILED, token="", error=ENDED_WITH_THE_RUN)
    ReplayCheckpoint.objects.filter(part__run_id=run_id).delete()
    ReplayPart.objects.filter(run_id=run_id).update(replays=b"", signature="", result=None)


def _claim_any(run_id: int) -> tuple[int, str] | None:
    """A part of the run no one replays (queued, or its worker silent)."""
    waiting = ReplayPart.objects.filter(unattended(), run_id=run_id).order_by("index")
    for part_id in waiting.values_list("pk", flat=True):
        token = claim(part_id)
        if token is not None:
            return part_id, token
    return None


def _merged(run_id: int) -> dict[str, SimulationResult]:
    by_label: dict[str, dict[str, SimulationResult]] = {}
    for result in ReplayPart.objects.filter(run_id=run_id).values_list("result", flat=True):
        for label, groups in (result or {}).items():
            for group, data in groups.items():
                by_label.setdefault(label, {})[group] = from_json(data)
    return {label: merge(groups) for label, groups in by_label.items()}


__all__ = [
    "REPLAY_PART",
    "PartFailed",
    "SoFar",
    "claim",
    "gather",
    "plan_parts",
    "replay_apart",
    "replay_task",
    "replay_workers",
    "run_part",
]
