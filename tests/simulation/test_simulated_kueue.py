"""The simulated cluster's Kueue: jobs become workloads, are admitted by the
engine, run for their declared time (sped up) and finish; a higher-priority
job preempts and the victim keeps its checkpointed progress."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest
from django.db import connection

from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from queues.locks import try_lock
from queues.simulation.kueue import DONE, SimulatedKueue
from queues.simulation.load import generate, job
from queues.simulation.nodes import ensure_nodes
from queues.simulation.runner import TICK_LOCK, step
from tests.simulation.kueue_support import (
    SPEEDUP,
    conditions,
    gpu_usage,
    kueue_objects,
    workload,
)

pytestmark = pytest.mark.django_db


def test_a_job_is_admitted_runs_its_declared_time_and_finishes(backend: SimulatedBackend) -> None:
    kueue = SimulatedKueue(backend, SPEEDUP)
    backend.create(job("team-a", "train", "main", 8, runtime=600, priority_class="low"))
    t0 = time.time()

    result = kueue.tick(t0)
    assert result.workloads_created == 1 and result.admitted == ["team-a/job-train"]
    admitted = workload(backend, "train")
    assert conditions(admitted)["Admitted"] == ("True", "Admitted")
    assert admitted["status"]["admission"]["podSetAssignments"][0]["flavors"] == {
        "cpu": "h100",
        "memory": "h100",
        "nvidia.com/gpu": "h100",
    }
    assert admitted["spec"]["priority"] == 10
    train = backend.get(TYPES["Job"], "train", "team-a")
    assert train is not None and train["spec"]["suspend"] is False
    assert gpu_usage(backend) == "8"

    # 600 s of work at 60x takes 10 real seconds: not done at 9, done at 10.
    assert kueue.tick(t0 + 9).finished == []
    assert kueue.tick(t0 + 10).finished == ["team-a/job-train"]
    assert conditions(workload(backend, "train"))["Finished"] == ("True", "Succeeded")
    train = backend.get(TYPES["Job"], "train", "team-a")
    assert train is not None and train["status"]["completionTime"]
    kueue.tick(t0 + 11)
    assert gpu_usage(backend) == "0"


def test_a_job_that_does_not_fit_waits_with_kueues_message(backend: SimulatedBackend) -> None:
    kueue = SimulatedKueue(backend, SPEEDUP)
    backend.create(job("team-a", "huge", "main", 16, runtime=600))
    kueue.tick(time.time())
    waiting = workload(backend, "huge")
    status, reason = conditions(waiting)["QuotaReserved"]
    assert (status, reason) == ("False", "Pending")
    message = next(
        c["message"] for c in waiting["status"]["conditions"] if c["type"] == "QuotaReserved"
    )
    assert "nvidia.com/gpu" in message and "h100" in message
    huge = backend.get(TYPES["Job"], "huge", "team-a")
    assert huge is not None and huge["spec"]["suspend"] is True


def test_a_higher_priority_job_preempts_and_the_victim_keeps_its_checkpoint(
    backend: SimulatedBackend,
) -> None:
    kueue = SimulatedKueue(backend, SPEEDUP)
    backend.create(job("team-a", "long", "main", 8, runtime=3600, priority_class="low"))
    t0 = time.time()
    kueue.tick(t0)
    # 25 real seconds = 1500 s of work; checkpoints every 600 s keep 1200 s.
    backend.create(job("team-a", "urgent", "main", 8, runtime=600, priority_class="high"))
    result = kueue.tick(t0 + 25)
    assert result.preempted == ["team-a/job-long"]
    victim = workload(backend, "long")
    assert conditions(victim)["Evicted"] == ("True", "Preempted")
    assert conditions(victim)["Preempted"][0] == "True"
    assert "admission" not in victim["status"]
    assert victim["metadata"]["annotations"][DONE] == "1200"
    long_job = backend.get(TYPES["Job"], "long", "team-a")
    assert long_job is not None and long_job["spec"]["suspend"] is True

    kueue.tick(t0 + 26)
    assert conditions(workload(backend, "urgent"))["Admitted"] == ("True", "Admitted")
    # The urgent job runs 10 s; in the tick that finishes it, the victim is
    # admitted again, with 2400 s of work left (40 real seconds).
    result = kueue.tick(t0 + 37)
    assert result.finished == ["team-a/job-urgent"] and result.admitted == ["team-a/job-long"]
    readmitted_at = t0 + 37
    assert kueue.tick(readmitted_at + 39).finished == []
    assert kueue.tick(readmitted_at + 40).finished == ["team-a/job-long"]


def test_queue_status_counts_pending_and_admitted(backend: SimulatedBackend) -> None:
    kueue = SimulatedKueue(backend, SPEEDUP)
    for name in ("a", "b", "c"):
        backend.create(job("team-a", name, "main", 4, runtime=6000))
    kueue.tick(time.time())
    queue = backend.get(TYPES["ClusterQueue"], "team-a")
    local = backend.get(TYPES["LocalQueue"], "main", "team-a")
    assert queue is not None and local is not None
    assert (queue["status"]["admittedWorkloads"], queue["status"]["pendingWorkloads"]) == (2, 1)
    assert local["status"]["admittedWorkloads"] == 2
    assert local["status"]["pendingWorkloads"] == 1


def test_a_workload_naming_a_missing_local_queue_is_inadmissible(
    backend: SimulatedBackend,
) -> None:
    backend.create(job("team-a", "lost", "no-such-queue", 1, runtime=60))
    SimulatedKueue(backend, SPEEDUP).tick(time.time())
    assert conditions(workload(backend, "lost"))["QuotaReserved"] == ("False", "Inadmissible")


def test_a_second_tick_at_the_same_time_writes_nothing(backend: SimulatedBackend) -> None:
    kueue = SimulatedKueue(backend, SPEEDUP)
    backend.create(job("team-a", "a", "main", 4, runtime=6000))
    backend.create(job("team-a", "big", "main", 16, runtime=6000))
    now = time.time()
    kueue.tick(now)
    version = backend.list(TYPES["Workload"])[1]
    kueue.tick(now)
    assert backend.list(TYPES["Workload"])[1] == version


def test_nodes_match_the_nominal_gpu_quota_and_are_added_once(backend: SimulatedBackend) -> None:
    assert ensure_nodes(backend) == 1
    nodes = backend.list(TYPES["Node"])[0]
    assert [n["metadata"]["labels"]["gpu"] for n in nodes] == ["h100"]
    assert nodes[0]["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert ensure_nodes(backend) == 0


def team_a_cluster() -> SimulatedBackend:
    """The scenario's policy with its namespace as team-a's, and team-a's own queue."""
    backend = SimulatedBackend()
    for obj in kueue_objects():
        if obj["kind"] == "Namespace":
            obj["metadata"]["labels"] = {"berth.dev/team": "team-a"}
        if obj["kind"] == "LocalQueue":
            obj["metadata"]["name"] = "team-a"
        backend.create(obj)
    return backend


def test_the_load_generator_submits_to_team_queues(db: Any) -> None:
    backend = team_a_cluster()
    # 6 jobs an hour per namespace: ten simulated hours bring some, every one suspended.
    created = generate(backend, time.time(), 36000, random.Random(7))
    jobs = backend.list(TYPES["Job"])[0]
    assert created == len(jobs) > 0
    assert {j["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] for j in jobs} == {"team-a"}
    assert all(j["spec"]["suspend"] is True for j in jobs)


def test_the_load_generator_sends_a_few_jobs_to_the_urgent_queue(db: Any) -> None:
    backend = team_a_cluster()
    urgent = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "urgent-release", "namespace": "team-a"},
        "spec": {"clusterQueue": "urgent"},
    }
    backend.create(urgent)
    created = generate(backend, time.time(), 10 * 36000, random.Random(7))
    queues = [
        j["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] for j in backend.list(TYPES["Job"])[0]
    ]
    assert len(queues) == created and "urgent-release" in queues
    assert queues.count("urgent-release") < queues.count("team-a") / 10


def test_step_adds_nodes_and_ticks_and_skips_while_another_step_runs(
    backend: SimulatedBackend, settings: Any
) -> None:
    settings.BERTH_SIMULATED_SPEEDUP = SPEEDUP
    backend.create(job("team-a", "train", "main", 8, runtime=600))
    report = step(load=False)
    assert report is not None
    assert (report.nodes_created, report.jobs_created) == (1, 0)
    assert report.tick.admitted == ["team-a/job-train"]
    # Another process (here: a thread with its own connection) stepping right now.
    held, release = threading.Event(), threading.Event()

    def other_stepper() -> None:
        try:
            with try_lock(TICK_LOCK) as taken:
                assert taken
                held.set()
                release.wait(30)
        finally:
            connection.close()

    other = threading.Thread(target=other_stepper)
    other.start()
    try:
        assert held.wait(30)
        assert step(load=False) is None
    finally:
        release.set()
        other.join()
    assert step(load=False) is not None
