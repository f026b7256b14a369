"""Two real Celery workers (subprocesses of this checkout, on the test Redis
and PostgreSQL) share a what-if's replays out: each replays one part, and the
run's merged figures are exactly those of one process replaying everything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.chaos.harness import wait
from tests.whatif.celery_workers import SOLO, celery_workers
from tests.whatif.test_scaleout import CHANGES, scenario
from whatif import service as whatif
from whatif.figures import compare
from whatif.models import ReplayPart, ReplayPartState, WhatIfRun, WhatIfState

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_two_workers_replay_a_part_each_and_the_merge_is_one_processs_result(
    tmp_path: Path,
) -> None:
    with celery_workers(
        tmp_path, {"a": SOLO, "b": SOLO}, BERTH_REPLAY_SPLIT_MIN="1", BERTH_REPLAY_WORKERS="2"
    ) as tails:
        # Four cohort trees, 7,500 workloads: each part takes seconds.
        run = whatif.create_run(None, source="scenario", changes=CHANGES, scenario=scenario(4, 750))
        wait(
            lambda: WhatIfRun.objects.get(pk=run.pk).done, lambda: "the run to end: " + tails(), 300
        )
    run.refresh_from_db()
    assert run.state == WhatIfState.SUCCEEDED, run.error
    prepared = whatif.prepared_for(run)
    alone = compare(prepared.today, prepared.proposal, prepared.stream())
    assert run.result == json.loads(json.dumps(alone))
    parts = list(ReplayPart.objects.filter(run=run))
    assert [p.state for p in parts] == [ReplayPartState.DONE] * 2
    assert {p.worker.split("@")[0] for p in parts} == {"a", "b"}, [p.worker for p in parts]
