"""The demo load submits jobs the way Berth renders a team's jobs: only jobs of
a queue class that runs on spot tolerate the spot taint."""

from __future__ import annotations

import random
from io import StringIO
from typing import Any

from django.core.management import call_command

from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from queues.reconcile import reconcile
from queues.simulation.load import generate


def test_only_eval_batch_jobs_tolerate_spot(db: Any, settings: Any) -> None:
    settings.BERTH_RECONCILE_ON_CHANGE = False
    call_command("seed_demo", "--quiet-logins", stdout=StringIO())
    backend = SimulatedBackend()
    assert reconcile(backend).status == "succeeded"
    # A few simulated hours of arrivals: every team gets some.
    assert generate(backend, now=1e9, elapsed=4 * 3600.0, rng=random.Random(7)) > 0
    tolerates: dict[str, set[bool]] = {}
    for obj in backend.list(TYPES["Job"])[0]:
        queue = obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
        spot = any(
            t.get("key") == "berth.dev/spot"
            for t in obj["spec"]["template"]["spec"].get("tolerations", [])
        )
        tolerates.setdefault(queue, set()).add(spot)
    assert tolerates["serving"] == {True}  # eval-batch
    assert tolerates["research"] == {False}  # training-large
    assert tolerates["platform"] == {False}  # interactive-dev
