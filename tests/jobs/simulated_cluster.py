"""The simulated cluster with the org's policy reconciled into it, for tests
that follow jobs end to end: submit over the API, create on the cluster, let
the simulated Kueue act, sync what it did."""

from __future__ import annotations

from typing import Any

from cluster.sync import sync_workloads
from jobs.follow import follow_jobs
from jobs.services import create_on_cluster
from queues.backends.simulated import SimulatedBackend
from queues.models import ReconcileRun
from queues.reconcile import reconcile
from queues.simulation.kueue import SimulatedKueue
from tests.jobs.conftest import job

URL = "/api/v1/jobs/"
SPEEDUP = 60.0


class Cluster:
    """The simulated cluster with the org's policy reconciled into it."""

    def __init__(self) -> None:
        self.backend = SimulatedBackend()
        run = reconcile(self.backend, trigger=ReconcileRun.Trigger.MANUAL)
        assert run.status == "succeeded", run.errors
        self.kueue = SimulatedKueue(self.backend, SPEEDUP)

    def submit(self, client: Any, **overrides: Any) -> int:
        response = client.post(URL, job(**overrides), format="json")
        assert response.status_code == 201, response.content
        job_id = int(response.json()["id"])
        # "skipped": a committing test already ran the create task after commit.
        assert create_on_cluster(self.backend, job_id) in ("created", "skipped")
        return job_id

    def at(self, now: float) -> None:
        """Kueue acts at ``now``; Berth syncs what it did."""
        self.kueue.tick(now)
        sync_workloads(self.backend)
        follow_jobs(self.backend)
