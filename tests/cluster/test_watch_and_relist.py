"""The workload watch and the periodic relist side by side on the real API
server, as ``manage.py sync_watch`` and beat's sync run them, while Kueue (the
test, with Kueue's field manager) creates Workloads for Berth's jobs, admits,
evicts, finishes and deletes them: no live Workload is ever marked deleted,
the records end as the cluster is, and each job's state follows its Workload
through the watch alone (the relist here records Workloads only; it never
follows jobs). How long that takes is measured by ``bench/freshness.py
--cluster envtest``; this test records the lags it saw (``record_property``)
and asserts nothing on them."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from cluster.models import EventType, WorkloadEvent, WorkloadRecord, WorkloadState
from cluster.sync import state_of, sync_workloads, watch_workloads
from jobs.models import JobRequest, JobState
from queues.backends.kubernetes import KubernetesBackend
from tests.celery_broker import wait_until
from tests.envtest.cluster import EnvtestCluster
from tests.envtest.controlplane import ControlPlane
from tests.envtest.kueue_player import KueuePlayer
from tests.jobs.cluster_roles import berth_uses
from tests.jobs.conftest import Org, job

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/api/v1/jobs/"
JOBS = 24
FOLLOWED = (JobState.ADMITTED, JobState.RUNNING)


@pytest.fixture
def berth(
    org: Org,
    kube: EnvtestCluster,
    control_plane: ControlPlane,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Iterator[EnvtestCluster]:
    """Berth on the real server as its ServiceAccount (jobs are created there
    after the submit commits), the research namespace made."""
    kube.add_foreign({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}})
    with berth_uses(control_plane.berth_kubeconfig, settings, monkeypatch, tmp_path / "home"):
        yield kube


class Loop:
    """``step`` run over and over in a thread, with its own client and
    database connection, until stopped; an exception stops it and is kept."""

    def __init__(self, step: Callable[[KubernetesBackend], object], plane: ControlPlane) -> None:
        self.step, self.plane = step, plane
        self.stop = threading.Event()
        self.rounds = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            with self.plane.berth_client() as api:
                backend = KubernetesBackend(api, request_timeout=30)
                while not self.stop.is_set():
                    self.step(backend)
                    self.rounds += 1
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            connection.close()

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(60)
        assert not self.thread.is_alive(), "the loop did not stop"
        assert self.error is None, f"the loop failed: {self.error!r}"


class ListTakesAWhile:
    """Berth's backend for the relist, whose list is a while old by the time
    it goes on to record and to look for what is missing, as a relist of a large
    cluster is: the watch records changes in between (the race of issue 15)."""

    def __init__(self, backend: KubernetesBackend, seconds: float = 0.2) -> None:
        self.backend, self.seconds = backend, seconds

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.backend, attribute)

    def list(self, *args: Any, **kwargs: Any) -> Any:
        listed = self.backend.list(*args, **kwargs)
        time.sleep(self.seconds)
        return listed


def slow_relist(backend: KubernetesBackend) -> object:
    return sync_workloads(ListTakesAWhile(backend))


class Watcher:
    """Samples the workload records every few milliseconds, as a reader of the
    API would, and keeps what should never be seen: a live Workload marked
    deleted, a deleted one brought back, a record going back to an older
    resourceVersion."""

    def __init__(self, deleted: dict[str, datetime]) -> None:
        self.deleted = deleted
        self.seen: dict[str, tuple[str, str]] = {}
        self.wrong: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                fields = ("uid", "name", "state", "resource_version")
                for uid, name, state, version in WorkloadRecord.objects.values_list(*fields):
                    before = self.seen.get(uid)
                    self.seen[uid] = (state, version)
                    if state == WorkloadState.DELETED and uid not in self.deleted:
                        self.wrong.append(f"live {name} marked deleted")
                    if before is None:
                        continue
                    if before[0] == WorkloadState.DELETED and state != WorkloadState.DELETED:
                        self.wrong.append(f"deleted {name} brought back as {state}")
                    if int(version or 0) < int(before[1] or 0):
                        self.wrong.append(f"{name} went back from {before[1]} to {version}")
                time.sleep(0.01)
        finally:
            connection.close()

    def finish(self) -> list[str]:
        self.stop.set()
        self.thread.join(30)
        return self.wrong


def followed(job_id: int) -> Callable[[], bool]:
    return lambda: JobRequest.objects.get(pk=job_id).state in FOLLOWED


def floor_to_second(at: datetime) -> datetime:
    return at.replace(microsecond=0)


def test_watch_and_relist_never_mark_a_live_workload_deleted_and_jobs_follow(
    org: Org, berth: EnvtestCluster, control_plane: ControlPlane, record_property: Any
) -> None:
    kube = berth
    kueue = KueuePlayer(kube)
    deleted: dict[str, datetime] = {}  # uid → when Kueue deleted it
    watch = Loop(lambda b: watch_workloads(b, timeout_seconds=1, rounds=1), control_plane)
    relist = Loop(slow_relist, control_plane)  # back to back: as many races as it can
    watcher = Watcher(deleted)
    names: dict[int, str] = {}  # job id → its Workload
    lags: list[float] = []
    try:
        for index in range(JOBS):
            answer = org.alice.post(URL, job(name=f"train-{index}", nodes=1), format="json")
            assert answer.status_code == 201, answer.content
            job_id = answer.json()["id"]
            made = kube.get("Job", f"train-{index}", "research")
            assert made is not None, answer.json()
            names[job_id] = kueue.workload_for(made)
            kueue.admit(names[job_id], "research")
            changed = time.monotonic()
            wait_until(followed(job_id), f"job {job_id}'s state to follow its admitted Workload")
            lags.append(time.monotonic() - changed)
            # Meanwhile Kueue goes on with the earlier ones.
            earlier = list(names.values())[index // 2]
            if index % 4 == 1:
                kueue.evict(earlier, "research")
            elif index % 4 == 2:
                kueue.finish(earlier, "research")
            elif index % 4 == 3 and earlier not in deleted.values():
                found = kube.get("Workload", earlier, "research")
                if found is not None:
                    deleted[found["metadata"]["uid"]] = datetime.now(UTC)
                    kueue.delete(earlier, "research")
    finally:
        watch.finish()
        relist.finish()
        wrong = watcher.finish()
    assert relist.rounds > JOBS, "the relist ran too rarely to race the watch"
    assert wrong == []

    # Never a live Workload marked deleted, even for a moment: each deletion
    # event is of a Workload Kueue deleted, at or after it did.
    for event in WorkloadEvent.objects.filter(type=EventType.DELETED).select_related("workload"):
        uid = event.workload.uid
        assert uid in deleted, f"live workload {event.workload.name} was marked deleted"
        assert event.at >= floor_to_second(deleted[uid]), (
            f"{event.workload.name} was marked deleted before Kueue deleted it"
        )

    # And the records end as the cluster is.
    sync_workloads(kube.backend)
    live = {w["metadata"]["uid"]: w for w in kube.objects("Workload")}
    for record in WorkloadRecord.objects.all():
        if record.uid in live:
            assert record.state == state_of(live[record.uid])[0], record.name
        else:
            assert record.uid in deleted and record.state == WorkloadState.DELETED
    assert len(live) + len(deleted) == JOBS
    record_property("job_state_lag_p50_s", round(statistics.median(lags), 3))
    record_property("job_state_lag_max_s", round(max(lags), 3))
    record_property("relist_rounds", relist.rounds)
