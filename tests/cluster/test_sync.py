"""Sync: Workloads on the cluster into WorkloadRecord and WorkloadEvent, queue
status into snapshots; on the simulated backend and over HTTP against the
API-server double, through the same code."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cluster.models import (
    CapacitySnapshot,
    EventType,
    QueueSnapshot,
    QueueStatus,
    SyncCursor,
    WorkloadEvent,
    WorkloadRecord,
)
from cluster.models import WorkloadState as State
from cluster.snapshots import snapshot_cluster, sync_queue_status
from cluster.sync import apply_watch_event, sync_workloads, watch_workloads
from queues.backends.base import TYPES
from tests.factories import team
from tests.reconcile.clusters import ClusterUnderTest

KUEUE = "kueue.x-k8s.io/v1beta2"
# Conditions come after the creationTimestamp the server stamps now, as on a
# real cluster: a fixed date would fall before it once the calendar moves on.
_BASE = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
T1 = (_BASE + timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
T2 = (_BASE + timedelta(minutes=7)).strftime("%Y-%m-%dT%H:%M:%SZ")


def workload(name: str, gpus: int = 8, pods: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": "research",
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": name[4:], "uid": f"uid-{name}"}
            ],
        },
        "spec": {
            "queueName": "research",
            "priority": 1000,
            "priorityClassRef": {
                "group": "kueue.x-k8s.io",
                "kind": "WorkloadPriorityClass",
                "name": "train-high",
            },
            "podSets": [
                {
                    "name": "main",
                    "count": pods,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "train",
                                    "image": "trainer:1",
                                    "resources": {
                                        "requests": {
                                            "nvidia.com/gpu": str(gpus // pods),
                                            "cpu": "8",
                                        }
                                    },
                                }
                            ]
                        }
                    },
                }
            ],
        },
    }


def condition(kind: str, status: bool, reason: str, at: str, message: str = "") -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": at,
    }


ADMITTED = {
    "admission": {
        "clusterQueue": "research",
        "podSetAssignments": [
            {
                "name": "main",
                "count": 2,
                "flavors": {"nvidia.com/gpu": "h100", "cpu": "h100"},
                "resourceUsage": {"nvidia.com/gpu": "8", "cpu": "16"},
            }
        ],
    },
    "conditions": [
        condition("QuotaReserved", True, "QuotaReserved", T1, "Quota reserved in ClusterQueue"),
        condition("Admitted", True, "Admitted", T1, "The workload is admitted"),
    ],
}


@pytest.fixture
def research(cluster: ClusterUnderTest) -> ClusterUnderTest:
    team("research", namespaces=["research"])
    cluster.add_foreign({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}})
    return cluster


def record(name: str) -> WorkloadRecord:
    return WorkloadRecord.objects.get(namespace="research", name=name)


def event_types(name: str) -> list[str]:
    return list(record(name).events.values_list("type", flat=True))


def test_a_workload_is_recorded_with_its_team_queue_requests_and_flavors(
    research: ClusterUnderTest,
) -> None:
    research.add_foreign(workload("job-train"))
    research.set_status("Workload", "job-train", ADMITTED, namespace="research")
    sync_workloads(research.backend)

    train = record("job-train")
    assert train.team is not None and train.team.slug == "research"
    assert (train.job_kind, train.job_name) == ("Job", "train")
    assert (train.local_queue, train.cluster_queue) == ("research", "research")
    assert (train.priority, train.priority_class) == (1000, "train-high")
    assert train.requested == {"nvidia.com/gpu": 8, "cpu": 16000}
    assert train.flavors == {"main": {"nvidia.com/gpu": "h100", "cpu": "h100"}}
    assert train.state == State.ADMITTED and train.admitted_at is not None
    assert event_types("job-train") == [
        EventType.CREATED,
        EventType.QUOTA_RESERVED,
        EventType.ADMITTED,
    ]


def test_syncing_the_same_state_again_writes_nothing(research: ClusterUnderTest) -> None:
    research.add_foreign(workload("job-train"))
    research.set_status("Workload", "job-train", ADMITTED, namespace="research")
    sync_workloads(research.backend)
    events = WorkloadEvent.objects.count()

    with CaptureQueriesContext(connection) as queries:
        sync_workloads(research.backend)
    writes = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith(("INSERT", "UPDATE", "DELETE")) and "jobs_synccursor" not in q["sql"]
    ]
    assert writes == []
    assert WorkloadEvent.objects.count() == events


def test_a_relist_skips_workloads_whose_resource_version_has_not_changed(
    research: ClusterUnderTest,
) -> None:
    """Unchanged Workloads cost a relist one read of their versions in all:
    no row lock, no event lookups, however many there are; a changed one is
    recorded as before."""
    for name in ("job-a", "job-b", "job-c", "job-d"):
        research.add_foreign(workload(name))
    sync_workloads(research.backend)
    research.set_status("Workload", "job-b", ADMITTED, namespace="research")

    with CaptureQueriesContext(connection) as queries:
        sync_workloads(research.backend)
    ours = [
        q["sql"]
        for q in queries.captured_queries
        if "jobs_workloadrecord" in q["sql"] or "jobs_workloadevent" in q["sql"]
    ]
    assert len([sql for sql in ours if "FOR UPDATE" in sql]) == 1  # job-b's, which changed
    assert record("job-b").state == State.ADMITTED

    with CaptureQueriesContext(connection) as queries:
        sync_workloads(research.backend)  # nothing changed
    ours = [
        q["sql"]
        for q in queries.captured_queries
        if "jobs_workloadrecord" in q["sql"] or "jobs_workloadevent" in q["sql"]
    ]
    assert len(ours) == 2  # the listed ones' versions, and which are missing: not one each
    assert not [sql for sql in ours if "FOR UPDATE" in sql]


def test_preemption_is_recorded_with_reason_and_preemptor(research: ClusterUnderTest) -> None:
    research.add_foreign(workload("job-urgent"))
    research.add_foreign(workload("job-long"))
    research.set_status("Workload", "job-urgent", ADMITTED, namespace="research")
    research.set_status("Workload", "job-long", ADMITTED, namespace="research")
    sync_workloads(research.backend)
    urgent_uid = record("job-urgent").uid

    message = (
        f"Preempted to accommodate a workload (UID: {urgent_uid}, JobUID: uid-job-urgent) "
        "due to prioritization in the ClusterQueue"
    )
    research.set_status(
        "Workload",
        "job-long",
        {
            "admission": None,  # Kueue drops the admission when it evicts
            "conditions": [
                condition("QuotaReserved", False, "Pending", T2, message),
                condition("Admitted", False, "NoReservation", T2),
                condition("Evicted", True, "Preempted", T2, message),
                condition("Preempted", True, "InClusterQueue", T2, message),
                condition("Requeued", True, "Preempted", T2, message),
            ],
        },
        namespace="research",
    )
    sync_workloads(research.backend)

    long = record("job-long")
    assert long.state == State.PENDING and long.evictions == 1
    preempted = long.events.get(type=EventType.PREEMPTED)
    assert preempted.reason == "InClusterQueue"
    assert preempted.details == {"preemptor_uid": urgent_uid, "preemptor": "research/job-urgent"}
    assert long.events.get(type=EventType.EVICTED).reason == "Preempted"
    assert long.events.filter(type=EventType.REQUEUED).exists()


def test_finished_failed_and_deleted_workloads(research: ClusterUnderTest) -> None:
    research.add_foreign(workload("job-ok"))
    research.add_foreign(workload("job-bad"))
    research.add_foreign(workload("job-gone"))
    for name, reason, message in (
        ("job-ok", "Succeeded", "Job finished successfully"),
        ("job-bad", "Failed", "Job failed: BackoffLimitExceeded"),
    ):
        status = {
            **ADMITTED,
            "conditions": [
                *ADMITTED["conditions"],
                condition("Finished", True, reason, T2, message),
            ],
        }
        research.set_status("Workload", name, status, namespace="research")
    sync_workloads(research.backend)
    research.remove("Workload", "job-gone", "research")
    sync_workloads(research.backend)

    assert record("job-ok").state == State.FINISHED and record("job-ok").finished_at
    assert record("job-bad").state == State.FAILED
    assert event_types("job-bad")[-1] == EventType.FAILED
    assert record("job-gone").state == State.DELETED
    assert event_types("job-gone")[-1] == EventType.DELETED


def test_watch_resumes_and_relists_after_410_without_missing_or_duplicating(
    research: ClusterUnderTest, caplog: pytest.LogCaptureFixture
) -> None:
    research.add_foreign(workload("job-a"))
    sync_workloads(research.backend)
    research.set_status("Workload", "job-a", ADMITTED, namespace="research")
    research.add_foreign(workload("job-b"))
    # The stored resourceVersion is now too old: the server answers 410 Gone.
    research.expire_history()
    with caplog.at_level("INFO", logger="cluster.sync"):
        watch_workloads(research.backend, timeout_seconds=1, rounds=2)
    assert "expired" in caplog.text  # the server answered 410 Gone; sync relisted

    assert record("job-a").state == State.ADMITTED
    assert record("job-b").state == State.PENDING
    assert event_types("job-a") == [
        EventType.CREATED,
        EventType.QUOTA_RESERVED,
        EventType.ADMITTED,
    ]
    # Later changes arrive through the resumed watch, once each.
    research.set_status("Workload", "job-b", ADMITTED, namespace="research")
    watch_workloads(research.backend, timeout_seconds=1, rounds=1)
    watch_workloads(research.backend, timeout_seconds=1, rounds=1)
    assert event_types("job-b") == [
        EventType.CREATED,
        EventType.QUOTA_RESERVED,
        EventType.ADMITTED,
    ]


def test_bookmarks_move_the_watch_cursor_without_writing_workloads(
    research: ClusterUnderTest,
) -> None:
    research.add_foreign(workload("job-a"))
    listed = int(sync_workloads(research.backend))
    records = WorkloadRecord.objects.count()
    applied = 0
    for attempt in range(8):
        # Writes elsewhere move the cluster's resourceVersion on; a bookmark
        # tells the watcher so, with no Workload in it.
        research.add_foreign(
            {
                "apiVersion": KUEUE,
                "kind": "ResourceFlavor",
                "metadata": {"name": f"elsewhere-{attempt}"},
                "spec": {},
            }
        )
        applied += watch_workloads(research.backend, timeout_seconds=3, rounds=1)
        cursor = SyncCursor.objects.get(kind="Workload")
        if int(cursor.resource_version) > listed:
            break
    assert int(cursor.resource_version) > listed, "no bookmark arrived"
    assert applied == 0 and WorkloadRecord.objects.count() == records


def test_snapshots_record_usage_borrowing_and_lending(research: ClusterUnderTest) -> None:
    def queue(name: str, nominal: str) -> dict[str, Any]:
        return {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": name},
            "spec": {
                "cohortName": "org",
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": "h100",
                                "resources": [{"name": "nvidia.com/gpu", "nominalQuota": nominal}],
                            }
                        ],
                    }
                ],
            },
        }

    research.add_foreign(queue("research", "8"))
    research.add_foreign(queue("serving", "8"))
    research.add_foreign(
        {
            "apiVersion": KUEUE,
            "kind": "ResourceFlavor",
            "metadata": {"name": "h100"},
            "spec": {"nodeLabels": {"gpu": "h100"}},
        }
    )
    for index in range(2):
        research.add_foreign(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"node-{index}", "labels": {"gpu": "h100"}},
                "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "192"}},
            }
        )

    def usage(total: str, borrowed: str, pending: int) -> dict[str, Any]:
        return {
            "pendingWorkloads": pending,
            "admittedWorkloads": 1,
            "flavorsReservation": [
                {
                    "name": "h100",
                    "resources": [{"name": "nvidia.com/gpu", "total": total, "borrowed": borrowed}],
                }
            ],
        }

    research.set_status("ClusterQueue", "research", usage("12", "4", 3))
    research.set_status("ClusterQueue", "serving", usage("2", "0", 0))
    assert snapshot_cluster(research.backend) == (2, 2)

    rows = {r.cluster_queue: r for r in QueueSnapshot.objects.all()}
    assert (rows["research"].usage, rows["research"].borrowed, rows["research"].lent) == (12, 4, 0)
    assert rows["research"].pending_workloads == 3
    assert (rows["serving"].usage, rows["serving"].borrowed, rows["serving"].lent) == (2, 0, 4)
    capacity = {c.resource: (c.allocatable, c.nodes) for c in CapacitySnapshot.objects.all()}
    assert capacity == {"nvidia.com/gpu": (16, 2), "cpu": (384000, 2)}
    largest = {c.resource: c.largest_node for c in CapacitySnapshot.objects.all()}
    assert largest == {"nvidia.com/gpu": 8, "cpu": 192000}
    # The queues' usage of the flavor at the same instant: 12 + 2.
    assert CapacitySnapshot.objects.get(resource="nvidia.com/gpu").allocated == 14


def test_queue_status_is_mirrored_only_when_it_changes(research: ClusterUnderTest) -> None:
    research.add_foreign(
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": "research"},
            "spec": {"namespaceSelector": {}, "resourceGroups": []},
        }
    )
    research.add_foreign(
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": "research", "namespace": "research"},
            "spec": {"clusterQueue": "research"},
        }
    )
    active = {
        "type": "Active",
        "status": "True",
        "reason": "Ready",
        "message": "Can admit",
        "lastTransitionTime": T1,
    }
    research.set_status(
        "ClusterQueue",
        "research",
        {
            "pendingWorkloads": 3,
            "reservingWorkloads": 2,
            "admittedWorkloads": 1,
            "conditions": [active],
        },
    )
    research.set_status(
        "LocalQueue",
        "research",
        {"pendingWorkloads": 3, "admittedWorkloads": 1},
        namespace="research",
    )
    assert sync_queue_status(research.backend) == 2
    cq = QueueStatus.objects.get(kind="ClusterQueue", name="research")
    assert (cq.pending_workloads, cq.reserving_workloads, cq.admitted_workloads) == (3, 2, 1)
    assert cq.status["conditions"] == [active]
    lq = QueueStatus.objects.get(kind="LocalQueue", namespace="research", name="research")
    assert (lq.cluster_queue, lq.pending_workloads, lq.admitted_workloads) == ("research", 3, 1)

    assert sync_queue_status(research.backend) == 0  # nothing changed, nothing written

    research.set_status("ClusterQueue", "research", {"pendingWorkloads": 0, "admittedWorkloads": 4})
    assert sync_queue_status(research.backend) == 1
    cq.refresh_from_db()
    assert (cq.pending_workloads, cq.admitted_workloads) == (0, 4)

    research.remove("LocalQueue", "research", "research")
    sync_queue_status(research.backend)
    assert not QueueStatus.objects.filter(kind="LocalQueue").exists()


def test_partial_admission_and_topology_placement_are_recorded_per_pod_set(
    research: ClusterUnderTest,
) -> None:
    """What estimates need to replay a gang as Kueue placed it: its minCount and
    topology request, and when admitted, the pods admitted and their nodes."""
    body = workload("job-gang", gpus=8, pods=4)
    pod_set = body["spec"]["podSets"][0]
    pod_set["minCount"] = 2
    pod_set["topologyRequest"] = {"required": "topology.berth.dev/rack"}
    research.add_foreign(body)
    admitted = {
        "admission": {
            "clusterQueue": "research",
            "podSetAssignments": [
                {
                    "name": "main",
                    "count": 3,
                    "flavors": {"nvidia.com/gpu": "h100", "cpu": "h100"},
                    "resourceUsage": {"nvidia.com/gpu": "6", "cpu": "24"},
                    "topologyAssignment": {
                        "levels": ["kubernetes.io/hostname"],
                        "slices": [
                            {
                                "domainCount": 2,
                                "valuesPerLevel": [
                                    {"individual": {"prefix": "node-", "roots": ["a", "b"]}}
                                ],
                                "podCounts": {"individual": [2, 1]},
                            }
                        ],
                    },
                }
            ],
        },
        "conditions": ADMITTED["conditions"],
    }
    research.set_status("Workload", "job-gang", admitted, namespace="research")
    sync_workloads(research.backend)
    (shape,) = record("job-gang").pod_sets
    assert shape["count"] == 4 and shape["min_count"] == 2
    assert shape["topology_request"] == {"required": "topology.berth.dev/rack"}
    assert shape["admitted_count"] == 3
    assert shape["placed_on"] == {"node-a": 2, "node-b": 1}


def test_nodes_are_kept_as_last_seen_writing_only_what_changed(
    research: ClusterUnderTest,
) -> None:
    from cluster.models import ObservedNode

    def node(name: str, rack: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"topology.berth.dev/rack": rack}},
        }

    for name, rack in (("n1", "r1"), ("n2", "r1")):
        research.add_foreign(node(name, rack))
        research.set_status("Node", name, {"allocatable": {"nvidia.com/gpu": "8", "cpu": "192"}})
    snapshot_cluster(research.backend)
    stored = {n.name: n for n in ObservedNode.objects.all()}
    assert set(stored) == {"n1", "n2"}
    assert stored["n1"].allocatable == {"nvidia.com/gpu": 8, "cpu": 192000}
    assert stored["n1"].labels["topology.berth.dev/rack"] == "r1"

    with CaptureQueriesContext(connection) as queries:
        snapshot_cluster(research.backend)
    assert not [
        q
        for q in queries.captured_queries
        if "jobs_observednode" in q["sql"] and q["sql"].startswith(("INSERT", "UPDATE", "DELETE"))
    ]

    research.remove("Node", "n2")
    snapshot_cluster(research.backend)
    assert list(ObservedNode.objects.values_list("name", flat=True)) == ["n1"]


class ListedEarlier:
    """The cluster, but its Workload list is one taken earlier: the relist
    that finishes after the watch recorded something newer."""

    def __init__(self, backend: Any, listed: tuple[list[dict[str, Any]], str]) -> None:
        self.backend, self.listed = backend, listed

    def list(self, rtype: Any, *args: Any, **kwargs: Any) -> tuple[list[dict[str, Any]], str]:
        return self.listed

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)


def test_a_relist_never_marks_deleted_what_the_watch_recorded_after_its_list(
    research: ClusterUnderTest,
) -> None:
    research.add_foreign(workload("job-old"))
    sync_workloads(research.backend)
    listed = research.backend.list(TYPES["Workload"])  # the relist's list, taken now
    research.add_foreign(workload("job-new"))  # created after it
    for event in research.backend.watch(TYPES["Workload"], listed[1], timeout_seconds=1):
        apply_watch_event(event)  # the watch, beside the relist, records it
    assert record("job-new").state != State.DELETED
    sync_workloads(ListedEarlier(research.backend, listed))  # the relist finishes
    assert record("job-new").state != State.DELETED
    assert not record("job-new").events.filter(type=EventType.DELETED).exists()
    assert record("job-old").state != State.DELETED


def test_a_relist_never_undoes_a_change_the_watch_recorded_after_its_list(
    research: ClusterUnderTest,
) -> None:
    research.add_foreign(workload("job-a"))
    sync_workloads(research.backend)
    listed = research.backend.list(TYPES["Workload"])  # the relist's list, taken now
    research.set_status("Workload", "job-a", ADMITTED, namespace="research")  # then admitted
    for event in research.backend.watch(TYPES["Workload"], listed[1], timeout_seconds=1):
        apply_watch_event(event)
    assert record("job-a").state == State.ADMITTED
    sync_workloads(ListedEarlier(research.backend, listed))  # the relist finishes
    assert record("job-a").state == State.ADMITTED


def test_a_relist_never_brings_back_a_deletion_the_watch_saw_after_its_list(
    research: ClusterUnderTest,
) -> None:
    research.add_foreign(workload("job-a"))
    sync_workloads(research.backend)
    listed = research.backend.list(TYPES["Workload"])  # still holds job-a
    research.remove("Workload", "job-a", "research")
    for event in research.backend.watch(TYPES["Workload"], listed[1], timeout_seconds=1):
        apply_watch_event(event)
    assert record("job-a").state == State.DELETED
    sync_workloads(ListedEarlier(research.backend, listed))
    assert record("job-a").state == State.DELETED
    assert record("job-a").events.filter(type=EventType.DELETED).count() == 1


def test_a_live_workload_marked_deleted_by_mistake_comes_back(
    research: ClusterUnderTest,
) -> None:
    research.add_foreign(workload("job-train"))
    sync_workloads(research.backend)
    WorkloadRecord.objects.filter(name="job-train").update(state=State.DELETED)
    sync_workloads(research.backend)  # the same resourceVersion, listed again
    assert record("job-train").state != State.DELETED
