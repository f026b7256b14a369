"""A what-if's replays shared out in parts (``whatif.scaleout``) on
PostgreSQL: the merged figures are those of one process; the run replays
parts no worker took (work stealing), shows figures so far at the milestones
every part has passed, takes over a part whose worker fell silent, and fails
with a clear error on a part whose stored inputs were changed. Tasks are
sent to a Redis queue nobody reads, so the run alone replays every part;
``test_scaleout_workers.py`` has two real workers."""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from queues.engine.parts import milestones
from queues.engine.replay_records import SimulationResult
from queues.engine.simulator import Simulator
from tests.celery_broker import redis_queue
from whatif import runs as whatif_runs
from whatif import scaleout
from whatif import service as whatif
from whatif.figures import compare, replay_options
from whatif.models import ReplayCheckpoint, ReplayPart, ReplayPartState, WhatIfRun, WhatIfState
from whatif.redrive import STALLED_AFTER, end_stalled
from whatif.scaleout import PartFailed, claim, gather, plan_parts, replay_apart, run_part

pytestmark = pytest.mark.django_db(transaction=True)


def scenario(cohorts: int = 3, per_queue: int = 40) -> str:
    """``cohorts`` cohort trees of two queues that borrow from each other,
    contended for a few minutes."""
    queues = []
    for c in range(cohorts):
        for q in range(2):
            flavor = "{name: default, resources: [{name: cpu, nominalQuota: 6, borrowingLimit: 6}]}"
            queues.append(
                f"  - {{name: cq-{c}-{q}, cohortName: cohort-{c}, "
                "preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}, "
                f"resourceGroups: [{{coveredResources: [cpu], flavors: [{flavor}]}}]}}"
            )
    cohort_rows = "\n".join(f"  - {{name: cohort-{c}}}" for c in range(cohorts))
    return (
        "resourceFlavors: [{name: default}]\n"
        f"cohorts:\n{cohort_rows}\n"
        "clusterQueues:\n" + "\n".join(queues) + "\n"
        "generate:\n  seed: 7\n  classes:\n"
        f"    - {{name: small, countPerQueue: {per_queue}, rate: 0.5, runtime: 20, "
        "priority: 50, podSets: [{requests: {cpu: 2}}]}\n"
        f"    - {{name: large, countPerQueue: {per_queue // 4}, rate: 0.1, runtime: 60, "
        "priority: 200, podSets: [{requests: {cpu: 6}}]}\n"
    )


CHANGES = [
    {
        "cluster_queue": "cq-0-0",
        "field": "nominal_quota",
        "flavor": "default",
        "resource": "cpu",
        "value": "12",
    }
]


def running_run(**kwargs: Any) -> tuple[WhatIfRun, whatif_runs.Prepared]:
    run = whatif.create_run(None, source="scenario", changes=CHANGES, scenario=scenario(**kwargs))
    WhatIfRun.objects.filter(pk=run.pk).update(state=WhatIfState.RUNNING)
    return run, whatif.prepared_for(run)


def test_parts_the_run_replays_itself_merge_to_one_processs_figures() -> None:
    run, prepared = running_run()
    alone = compare(prepared.today, prepared.proposal, prepared.stream())
    shown: list[dict[str, Any]] = []
    with redis_queue():  # the parts' tasks wait where no worker reads
        apart = compare(
            prepared.today,
            prepared.proposal,
            prepared.stream(),
            so_far=shown.append,
            every=0.0,
            apart=functools.partial(replay_apart, run.pk, parts=2),
        )
    assert apart == alone
    parts = list(ReplayPart.objects.filter(run=run))
    assert [p.state for p in parts] == [ReplayPartState.DONE] * 2
    assert sorted(g for p in parts for g in p.groups) == ["cohort-0", "cohort-1", "cohort-2"]
    # Inputs and results are dropped once merged; who replayed what stays.
    assert all(bytes(p.replays) == b"" and p.result is None and p.seconds for p in parts)
    assert not ReplayCheckpoint.objects.exists()
    # The first part was replayed before the second began: figures so far come
    # as the second passes each milestone (the first handed them all over).
    assert shown, "no figures so far"
    passed = [figures["partial"]["simulated_seconds"] for figures in shown]
    assert passed == sorted(passed) and len(set(passed)) == len(passed)
    assert all(figures["recorded"] is None for figures in shown)


def test_figures_so_far_from_parts_are_the_whole_replay_stopped_at_a_milestone() -> None:
    run, prepared = running_run()
    stream = prepared.stream()
    seen: dict[float, dict[str, SimulationResult]] = {}
    with redis_queue():
        frame, _ = replay_apart(
            run.pk,
            {"today": prepared.today},
            stream.build,
            replay_options(stream),
            3,
            so_far=lambda frame, at, runs: seen.setdefault(at, runs),
            every=0.0,
        )
    assert seen and set(seen) <= set(milestones(frame))
    whole = Simulator(prepared.today, stream.build(), **replay_options(stream))
    whole.begin()
    for at in sorted(seen):
        whole.advance(at)
        stopped, merged = whole.snapshot(at), seen[at]["today"]
        assert merged.records == stopped.records
        assert merged.totals == stopped.totals


def test_figures_so_far_read_late_hold_every_record_handed_over_before() -> None:
    # A milestone hands over only the records new or changed since the last:
    # the run, reading the last one after skipping the others, still has all.
    run, prepared = running_run()
    stream = prepared.stream()
    options = replay_options(stream)
    frame, parts = plan_parts(run.pk, {"today": prepared.today}, stream.build, options, 3)
    for part in parts:
        token = claim(part.pk)
        assert token is not None and run_part(part.pk, token) == "done"
    seen: dict[str, SimulationResult] = {}
    watch = scaleout._Watch(run.pk, frame, None, lambda f, at, runs: seen.update(runs), 0.0)
    watch._figures_so_far(len(parts))
    last = milestones(frame)[-1]
    whole = Simulator(prepared.today, stream.build(), **options)
    whole.begin()
    whole.advance(last)
    stopped = whole.snapshot(last)
    assert seen["today"].records == stopped.records
    assert seen["today"].totals == stopped.totals
    assert any(r.finished is not None for r in stopped.records.values())


def test_a_part_is_claimed_once_and_taken_over_when_its_worker_falls_silent() -> None:
    run, prepared = running_run()
    stream = prepared.stream()
    _, (part, *_) = plan_parts(run.pk, {"today": prepared.today}, stream.build, {}, 2)
    first = claim(part.pk)
    assert first is not None and claim(part.pk) is None  # taken: nobody else gets it
    ReplayPart.objects.filter(pk=part.pk).update(
        heartbeat_at=timezone.now() - timedelta(minutes=10)
    )
    second = claim(part.pk)
    assert second is not None and second != first
    assert run_part(part.pk, first) == "taken over"  # the silent worker's claim is gone
    assert run_part(part.pk, second) == "done"
    assert ReplayPart.objects.get(pk=part.pk).state == ReplayPartState.DONE


def test_a_part_whose_inputs_were_changed_fails_the_run_saying_so() -> None:
    run, prepared = running_run()
    stream = prepared.stream()
    with redis_queue():
        _, parts = plan_parts(run.pk, {"today": prepared.today}, stream.build, {}, 2)
        blob = bytearray(parts[1].replays)
        blob[-1] ^= 1
        ReplayPart.objects.filter(pk=parts[1].pk).update(replays=bytes(blob))
        token = claim(parts[1].pk)
        assert token is not None
        assert run_part(parts[1].pk, token) == "failed"
    failed = ReplayPart.objects.get(pk=parts[1].pk)
    assert failed.state == ReplayPartState.FAILED
    assert "do not carry Berth's signature" in failed.error


def test_a_failed_part_ends_the_gathering_naming_the_part() -> None:
    run, prepared = running_run()
    stream = prepared.stream()
    frame, parts = plan_parts(run.pk, {"today": prepared.today}, stream.build, {}, 2)
    ReplayPart.objects.filter(pk=parts[1].pk).update(
        state=ReplayPartState.FAILED, error="its stored inputs do not carry Berth's signature"
    )
    with pytest.raises(PartFailed, match="part 2 failed: its stored inputs"):
        gather(run.pk, frame)
    # The run stopped replaying its own part once it saw the failure and ended
    # it: no worker takes it up later. The parts' inputs are dropped.
    ended = ReplayPart.objects.get(pk=parts[0].pk)
    assert ended.state == ReplayPartState.FAILED and ended.error == scaleout.ENDED_WITH_THE_RUN
    assert claim(parts[0].pk) is None
    assert not ReplayPart.objects.filter(run=run).exclude(replays=b"").exists()


def test_inputs_signed_for_one_part_are_refused_in_another() -> None:
    run, prepared = running_run()
    stream = prepared.stream()
    _, parts = plan_parts(run.pk, {"today": prepared.today}, stream.build, {}, 2)
    # A valid blob and signature, copied to the other part's row.
    ReplayPart.objects.filter(pk=parts[1].pk).update(
        replays=parts[0].replays, signature=parts[0].signature
    )
    token = claim(parts[1].pk)
    assert token is not None and run_part(parts[1].pk, token) == "failed"
    assert "signature" in ReplayPart.objects.get(pk=parts[1].pk).error


def test_the_runs_own_watch_failing_is_not_blamed_on_the_part_it_replays() -> None:
    run, prepared = running_run()
    stream = prepared.stream()
    _, parts = plan_parts(run.pk, {"today": prepared.today}, stream.build, {}, 2)
    token = claim(parts[0].pk)
    assert token is not None

    def watch() -> None:
        raise KeyError("today")  # a bug in the figures so far, say

    with pytest.raises(KeyError):
        run_part(parts[0].pk, token, between=watch)
    assert ReplayPart.objects.get(pk=parts[0].pk).state == ReplayPartState.RUNNING


def test_a_part_of_a_run_that_is_no_longer_running_stops() -> None:
    run, prepared = running_run()
    stream = prepared.stream()
    _, parts = plan_parts(run.pk, {"today": prepared.today}, stream.build, {}, 2)
    token = claim(parts[0].pk)
    assert token is not None
    WhatIfRun.objects.filter(pk=run.pk).update(state=WhatIfState.FAILED)  # its task died
    assert run_part(parts[0].pk, token) == "taken over"


def test_small_runs_and_single_trees_are_not_shared_out(settings: Any) -> None:
    settings.BERTH_REPLAY_WORKERS = 2
    run, prepared = running_run()
    stream = prepared.stream()
    single, single_prepared = running_run(cohorts=1)
    # Embedded (tasks run here, one after another): never.
    settings.BERTH_REPLAY_SPLIT_MIN = 1
    assert whatif_runs._shared_out(run.pk, prepared, stream) is None
    with redis_queue():
        settings.BERTH_REPLAY_SPLIT_MIN = stream.count + 1
        assert whatif_runs._shared_out(run.pk, prepared, stream) is None
        settings.BERTH_REPLAY_SPLIT_MIN = stream.count
        assert whatif_runs._shared_out(run.pk, prepared, stream) is not None
        assert whatif_runs._shared_out(single.pk, single_prepared, single_prepared.stream()) is None


def test_another_parts_failure_is_raised_not_blamed_on_the_run_s_own_part() -> None:
    run, prepared = running_run()
    stream = prepared.stream()
    _, parts = plan_parts(run.pk, {"today": prepared.today}, stream.build, {}, 2)
    ReplayPart.objects.filter(pk=parts[1].pk).update(state=ReplayPartState.FAILED, error="boom")
    token = claim(parts[0].pk)
    assert token is not None

    def watch() -> None:
        raise PartFailed("part 1 failed: boom")

    with pytest.raises(PartFailed):
        run_part(parts[0].pk, token, between=watch)
    assert ReplayPart.objects.get(pk=parts[0].pk).state == ReplayPartState.RUNNING


def test_a_run_whose_worker_was_lost_fails_and_its_parts_let_go_of_their_inputs() -> None:
    run, prepared = running_run()
    stream = prepared.stream()
    _, parts = plan_parts(run.pk, {"today": prepared.today}, stream.build, {}, 2)
    token = claim(parts[0].pk)
    assert token is not None
    now = timezone.now()
    WhatIfRun.objects.filter(pk=run.pk).update(
        heartbeat_at=now - STALLED_AFTER + timedelta(seconds=30)
    )
    assert end_stalled(now) == {"whatif_runs": 0, "capacity_plans": 0}
    assert WhatIfRun.objects.get(pk=run.pk).state == WhatIfState.RUNNING

    WhatIfRun.objects.filter(pk=run.pk).update(
        heartbeat_at=now - STALLED_AFTER - timedelta(seconds=30)
    )
    assert end_stalled(now) == {"whatif_runs": 1, "capacity_plans": 0}
    ended = WhatIfRun.objects.get(pk=run.pk)
    assert ended.state == WhatIfState.FAILED and ended.finished_at == now
    assert ended.error == (
        "the worker replaying it stopped: no progress for 30 minutes (it was killed or "
        "restarted); ask again"
    )
    rows = list(ReplayPart.objects.filter(run_id=run.pk))
    assert {(p.state, p.error) for p in rows} == {
        (ReplayPartState.FAILED, scaleout.ENDED_WITH_THE_RUN)
    }
    assert all(bytes(p.replays) == b"" and p.result is None for p in rows)
    # The part's worker, still going, stops; the sweep ends the run once.
    assert run_part(parts[0].pk, token) == "taken over"
    assert end_stalled(now) == {"whatif_runs": 0, "capacity_plans": 0}


def test_a_run_watching_its_parts_says_it_is_alive_though_its_progress_stands_still() -> None:
    run, prepared = running_run()
    stream = prepared.stream()
    frame, _ = plan_parts(run.pk, {"today": prepared.today}, stream.build, {}, 2)
    long_ago = timezone.now() - STALLED_AFTER - timedelta(minutes=5)
    WhatIfRun.objects.filter(pk=run.pk).update(heartbeat_at=long_ago)
    gather(run.pk, frame)  # no progress callback: nothing else writes the heartbeat
    assert WhatIfRun.objects.get(pk=run.pk).heartbeat_at > long_ago
    assert end_stalled() == {"whatif_runs": 0, "capacity_plans": 0}


def test_a_part_stored_with_its_milestones_beside_it_still_replays() -> None:
    # Parts stored before milestones were worked out from the frame held them
    # too: a worker upgraded while such a run goes on replays them the same.
    run, prepared = running_run()
    stream = prepared.stream()
    frame, (part, *_) = plan_parts(run.pk, {"today": prepared.today}, stream.build, {}, 2)
    _, replays = scaleout._unseal(bytes(part.replays), part.signature, run.pk, part.index)
    blob, signature = scaleout._seal((frame, milestones(frame), replays), run.pk, part.index)
    ReplayPart.objects.filter(pk=part.pk).update(replays=blob, signature=signature)
    token = claim(part.pk)
    assert token is not None and run_part(part.pk, token) == "done"
