"""Owner references on the simulated cluster, as Kubernetes' garbage collector
treats them: deleting a job deletes the Workload it owns (Berth deletes with
background propagation), an object with another owner left keeps it, and an
object whose owners are all gone (left behind by an older Berth, whose deletes
did not cascade) is collected at the next step, so it cannot hold quota or the
head of a queue across restarts."""

from __future__ import annotations

import time
from typing import Any

from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from queues.models import SimulatedEvent, SimulatedObject
from queues.simulation.kueue import SimulatedKueue
from queues.simulation.load import job
from queues.simulation.runner import step
from tests.simulation.kueue_support import SPEEDUP, conditions, workload


def names(backend: SimulatedBackend, kind: str) -> set[str]:
    return {o["metadata"]["name"] for o in backend.list(TYPES[kind])[0]}


def dependent(name: str, owners: list[dict[str, Any]]) -> dict[str, Any]:
    """A Workload-shaped dependent with the owners given (a Workload is what the
    simulated cluster makes with owner references)."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "team-a", "ownerReferences": owners},
        "spec": {"queueName": "none", "podSets": [], "active": False},
    }


def ref(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": metadata["name"],
            "uid": metadata["uid"]}  # fmt: skip


def test_deleting_a_job_deletes_its_workload_and_a_watch_sees_both_go(
    backend: SimulatedBackend,
) -> None:
    kueue = SimulatedKueue(backend, SPEEDUP)
    backend.create(job("team-a", "train", "main", 8, runtime=600))
    backend.create(job("team-a", "other", "main", 8, runtime=600))
    kueue.tick(time.time())
    assert names(backend, "Workload") == {"job-train", "job-other"}
    version = backend.list(TYPES["Workload"])[1]

    backend.delete(TYPES["Job"], "train", "team-a")
    assert names(backend, "Workload") == {"job-other"}
    assert names(backend, "Job") == {"other"}
    deleted = [
        (e.kind, e.body["metadata"]["name"])
        for e in SimulatedEvent.objects.filter(id__gt=int(version), event_type="DELETED")
    ]
    assert deleted == [("Job", "train"), ("Workload", "job-train")]
    events = list(backend.watch(TYPES["Workload"], version, timeout_seconds=0))
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [("DELETED", "job-train")]


def test_the_quota_of_a_deleted_job_is_free_for_the_next_tick(backend: SimulatedBackend) -> None:
    kueue = SimulatedKueue(backend, SPEEDUP)
    backend.create(job("team-a", "first", "main", 8, runtime=600))
    t0 = time.time()
    kueue.tick(t0)
    backend.create(job("team-a", "second", "main", 8, runtime=6000))
    kueue.tick(t0 + 1)
    assert conditions(workload(backend, "second"))["QuotaReserved"][0] == "False"

    backend.delete(TYPES["Job"], "first", "team-a")
    result = kueue.tick(t0 + 2)
    assert result.admitted == ["team-a/job-second"]
    # Past the first job's runtime: nothing of it finishes, nothing of it is left.
    assert kueue.tick(t0 + 20).finished == []
    assert names(backend, "Workload") == {"job-second"}


def test_a_dependent_with_another_owner_left_keeps_it(backend: SimulatedBackend) -> None:
    a = backend.create(job("team-a", "a", "none", 1, runtime=60))
    b = backend.create(job("team-a", "b", "none", 1, runtime=60))
    backend.create(dependent("shared", [ref(a), ref(b)]))
    backend.create(dependent("only-a", [ref(a)]))

    backend.delete(TYPES["Job"], "a", "team-a")
    assert names(backend, "Workload") == {"shared"}
    shared = backend.get(TYPES["Workload"], "shared", "team-a")
    assert shared is not None
    assert [r["name"] for r in shared["metadata"]["ownerReferences"]] == ["b"]
    backend.delete(TYPES["Job"], "b", "team-a")
    assert names(backend, "Workload") == set()


def test_deletes_cascade_through_dependents_of_dependents(backend: SimulatedBackend) -> None:
    top = backend.create(job("team-a", "top", "none", 1, runtime=60))
    middle = backend.create(dependent("middle", [ref(top)]))
    backend.create(dependent("bottom", [ref(middle)]))
    backend.create(dependent("elsewhere", [ref(backend.create(job("team-a", "x", "none", 1, 60)))]))

    backend.delete(TYPES["Job"], "top", "team-a")
    assert names(backend, "Workload") == {"elsewhere"}


def test_a_workload_orphaned_by_an_older_berth_is_collected_at_the_next_step(
    backend: SimulatedBackend, settings: Any
) -> None:
    """A database from before deletes cascaded: the job is gone, its Workload
    still holds all of the queue's GPUs. The next step (after a restart, the
    first) collects it, and the job behind it is admitted in that same step."""
    settings.BERTH_SIMULATED_SPEEDUP = SPEEDUP
    backend.create(job("team-a", "cancelled", "main", 8, runtime=3600))
    report = step(load=False)
    assert report is not None and report.tick.admitted == ["team-a/job-cancelled"]
    SimulatedObject.objects.filter(kind="Job", name="cancelled").delete()  # no cascade
    backend.create(job("team-a", "next", "main", 8, runtime=3600))

    report = step(load=False)
    assert report is not None and report.tick.admitted == ["team-a/job-next"]
    assert names(backend, "Workload") == {"job-next"}
    assert backend.collect_garbage() == 0  # nothing more to collect


def test_a_job_submitted_again_under_an_old_name_gets_its_own_workload(
    backend: SimulatedBackend,
) -> None:
    kueue = SimulatedKueue(backend, SPEEDUP)
    backend.create(job("team-a", "train", "main", 8, runtime=6000))
    t0 = time.time()
    kueue.tick(t0)
    backend.delete(TYPES["Job"], "train", "team-a")
    again = backend.create(job("team-a", "train", "main", 8, runtime=6000))

    assert kueue.tick(t0 + 1).workloads_created == 1
    fresh = workload(backend, "train")
    assert fresh["metadata"]["ownerReferences"][0]["uid"] == again["metadata"]["uid"]
    assert "admission" in fresh["status"]  # it starts from the beginning of the line


def test_a_workload_left_by_an_older_job_of_the_same_name_does_not_drive_the_new_one(
    backend: SimulatedBackend, settings: Any
) -> None:
    """Until the garbage collector takes it, an orphaned Workload is not the new
    job's: finishing it does not finish the new job, and the new job gets its
    own Workload once the old one is collected."""
    settings.BERTH_SIMULATED_SPEEDUP = SPEEDUP
    kueue = SimulatedKueue(backend, SPEEDUP)
    backend.create(job("team-a", "train", "main", 8, runtime=600))
    t0 = time.time()
    kueue.tick(t0)
    SimulatedObject.objects.filter(kind="Job", name="train").delete()  # no cascade
    again = backend.create(job("team-a", "train", "main", 8, runtime=6000))

    assert kueue.tick(t0 + 1).workloads_created == 0  # the old one has its name
    assert kueue.tick(t0 + 20).finished == ["team-a/job-train"]  # the old one's runtime
    new_job = backend.get(TYPES["Job"], "train", "team-a")
    assert new_job is not None and new_job["spec"]["suspend"] is True
    assert "completionTime" not in (new_job.get("status") or {})

    report = step(load=False)
    assert report is not None and report.tick.workloads_created == 1
    fresh = workload(backend, "train")
    assert fresh["metadata"]["ownerReferences"][0]["uid"] == again["metadata"]["uid"]
