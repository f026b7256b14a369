"""Kueue features on the simulated cluster: maximum execution time, LocalQueue
stop policies, a ClusterQueue's namespace selector, admission-check retries,
topology-aware placement, partial admission and admission fair sharing."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from queues.kueue.topology_assignment import pods_per_node
from queues.simulation.kueue import SimulatedKueue
from queues.simulation.load import job
from queues.simulation.nodes import ensure_nodes
from tests.simulation.kueue_support import (
    KUEUE,
    SPEEDUP,
    conditions,
    gpu_usage,
    kueue_objects,
    workload,
)

pytestmark = pytest.mark.django_db


def test_a_job_past_its_maximum_execution_time_is_deactivated_counting_past_admissions(
    backend: SimulatedBackend,
) -> None:
    """Kueue's maximumExecutionTimeSeconds (from the job's
    kueue.x-k8s.io/max-exec-time-seconds label, which Berth renders from
    max_runtime_seconds): admitted time, past admissions included, in the
    simulated cluster's work; past it the workload is deactivated with
    Kueue's reason, its quota freed and its job stopped."""
    kueue = SimulatedKueue(backend, SPEEDUP)
    capped = job("team-a", "capped", "main", 8, runtime=3600, priority_class="low")
    capped["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = "1800"
    backend.create(capped)
    t0 = float(int(time.time()))  # the start annotation keeps whole seconds
    kueue.tick(t0)
    assert workload(backend, "capped")["spec"]["maximumExecutionTimeSeconds"] == 1800
    # 10 s (600 s of work), then preempted: 600 s count towards its 1800.
    backend.create(job("team-a", "urgent", "main", 8, runtime=60, priority_class="high"))
    assert kueue.tick(t0 + 10).preempted == ["team-a/job-capped"]
    evicted = workload(backend, "capped")
    assert evicted["status"]["accumulatedPastExexcutionTimeSeconds"] == 600
    # urgent, admitted as it preempts, runs 1 s; capped is admitted again then.
    assert kueue.tick(t0 + 11).admitted == ["team-a/job-capped"]
    # 1200 s of work left to its maximum: 20 real seconds.
    assert kueue.tick(t0 + 30).timed_out == []
    result = kueue.tick(t0 + 31)
    assert result.timed_out == ["team-a/job-capped"] and result.finished == []
    stopped = workload(backend, "capped")
    assert stopped["spec"]["active"] is False
    assert conditions(stopped)["Evicted"] == (
        "True",
        "DeactivatedDueToMaximumExecutionTimeExceeded",
    )
    assert "admission" not in stopped["status"]
    capped_job = backend.get(TYPES["Job"], "capped", "team-a")
    assert capped_job is not None and capped_job["spec"]["suspend"] is True
    kueue.tick(t0 + 32)
    assert gpu_usage(backend) == "0"


def stop_local_queue(backend: SimulatedBackend, policy: str) -> None:
    queue = backend.get(TYPES["LocalQueue"], "main", "team-a")
    assert queue is not None
    queue["spec"]["stopPolicy"] = policy
    backend.replace(queue)


def test_a_held_local_queue_admits_nothing_new_and_lets_running_work_finish(
    backend: SimulatedBackend,
) -> None:
    kueue = SimulatedKueue(backend, SPEEDUP)
    backend.create(job("team-a", "running", "main", 4, runtime=600))
    t0 = time.time()
    kueue.tick(t0)
    stop_local_queue(backend, "Hold")
    backend.create(job("team-a", "later", "main", 4, runtime=600))
    assert kueue.tick(t0 + 1).admitted == []
    waiting = workload(backend, "later")
    assert conditions(waiting)["QuotaReserved"] == ("False", "Inadmissible")
    assert any(
        c["message"] == "LocalQueue main is stopped" for c in waiting["status"]["conditions"]
    )
    assert conditions(workload(backend, "running"))["Admitted"] == ("True", "Admitted")
    assert kueue.tick(t0 + 10).finished == ["team-a/job-running"]
    stop_local_queue(backend, "None")
    assert kueue.tick(t0 + 11).admitted == ["team-a/job-later"]


def test_draining_a_local_queue_evicts_its_running_work_until_it_restarts(
    backend: SimulatedBackend,
) -> None:
    kueue = SimulatedKueue(backend, SPEEDUP)
    backend.create(job("team-a", "running", "main", 8, runtime=6000))
    t0 = time.time()
    kueue.tick(t0)
    stop_local_queue(backend, "HoldAndDrain")
    kueue.tick(t0 + 1)
    evicted = workload(backend, "running")
    assert conditions(evicted)["Evicted"] == ("True", "LocalQueueStopped")
    assert "Preempted" not in conditions(evicted)
    assert "admission" not in evicted["status"]
    running = backend.get(TYPES["Job"], "running", "team-a")
    assert running is not None and running["spec"]["suspend"] is True
    kueue.tick(t0 + 2)
    assert gpu_usage(backend) == "0"
    assert conditions(workload(backend, "running"))["QuotaReserved"] == ("False", "Inadmissible")
    stop_local_queue(backend, "None")
    assert kueue.tick(t0 + 3).admitted == ["team-a/job-running"]


def test_a_namespace_the_cluster_queue_does_not_select_waits_until_it_is_labelled(
    backend: SimulatedBackend,
) -> None:
    queue = backend.get(TYPES["ClusterQueue"], "team-a")
    assert queue is not None
    queue["spec"]["namespaceSelector"] = {"matchLabels": {"berth.dev/team": "team-a"}}
    backend.replace(queue)
    kueue = SimulatedKueue(backend, SPEEDUP)
    backend.create(job("team-a", "early", "main", 4, runtime=600))
    now = time.time()
    assert kueue.tick(now).admitted == []
    waiting = workload(backend, "early")
    assert conditions(waiting)["QuotaReserved"] == ("False", "Inadmissible")
    assert any(
        c["message"] == "Workload namespace doesn't match ClusterQueue selector"
        for c in waiting["status"]["conditions"]
    )
    namespace = backend.get(TYPES["Namespace"], "team-a")
    assert namespace is not None
    namespace["metadata"]["labels"] = {"berth.dev/team": "team-a"}
    backend.replace(namespace)
    assert kueue.tick(now + 1).admitted == ["team-a/job-early"]


def test_a_retry_check_with_requeue_after_keeps_the_workload_out_until_then(
    backend: SimulatedBackend,
) -> None:
    """Kueue: a check answered Retry evicts the workload; its requeueAfterSeconds
    (from the check's lastTransitionTime) becomes status.requeueState.requeueAt,
    and the workload is not admitted again before that time."""
    queue = backend.get(TYPES["ClusterQueue"], "team-a")
    assert queue is not None
    queue["spec"]["admissionChecks"] = ["capacity-check"]
    backend.replace(queue)
    kueue = SimulatedKueue(backend, SPEEDUP)
    backend.create(job("team-a", "train", "main", 8, runtime=6000))
    now = float(int(time.time()))
    kueue.tick(now)
    reserved = workload(backend, "train")
    assert reserved["status"]["admission"]
    assert [c["state"] for c in reserved["status"]["admissionChecks"]] == ["Pending"]

    # The check's controller asks to try again in two minutes.
    check = reserved["status"]["admissionChecks"][0]
    check.update(
        state="Retry",
        requeueAfterSeconds=120,
        lastTransitionTime=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + 1)),
    )
    backend.replace(reserved)
    kueue.tick(now + 1)
    evicted = workload(backend, "train")
    assert "admission" not in evicted["status"]
    assert conditions(evicted)["Evicted"] == ("True", "AdmissionCheck")
    assert evicted["status"]["requeueState"]["requeueAt"] == time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + 121)
    )

    for later in (now + 2, now + 60, now + 120):
        kueue.tick(later)
        assert "admission" not in workload(backend, "train")["status"], later
    kueue.tick(now + 121)
    again = workload(backend, "train")
    assert again["status"]["admission"]
    assert [c["state"] for c in again["status"]["admissionChecks"]] == ["Pending"]


def test_simulated_nodes_sit_in_racks_of_four_and_blocks_of_four_racks(db: Any) -> None:
    backend = SimulatedBackend()
    for obj in kueue_objects(gpus=8 * 20):  # 20 nodes
        backend.create(obj)
    assert ensure_nodes(backend) == 20
    labels = {
        n["metadata"]["name"]: n["metadata"]["labels"] for n in backend.list(TYPES["Node"])[0]
    }
    racks: dict[str, list[str]] = {}
    for name, node_labels in labels.items():
        racks.setdefault(node_labels["topology.berth.dev/rack"], []).append(name)
    assert sorted(len(members) for members in racks.values()) == [4, 4, 4, 4, 4]
    assert labels["sim-h100-000"]["topology.berth.dev/block"] == "h100-b0"
    assert labels["sim-h100-016"]["topology.berth.dev/block"] == "h100-b1"
    assert labels["sim-h100-015"]["topology.berth.dev/rack"] == "h100-r3"

    # A node from before racks existed gets its labels, and nothing is added.
    old = backend.get(TYPES["Node"], "sim-h100-005")
    assert old is not None
    for key in ("topology.berth.dev/rack", "topology.berth.dev/block"):
        del old["metadata"]["labels"][key]
    backend.replace(old)
    assert ensure_nodes(backend) == 0
    relabelled = backend.get(TYPES["Node"], "sim-h100-005")
    assert relabelled is not None
    assert relabelled["metadata"]["labels"]["topology.berth.dev/rack"] == "h100-r1"


def topology_cluster(db: Any, gpus: int) -> SimulatedBackend:
    """kueue_objects with a Topology of racks on the flavor, and its nodes."""
    backend = SimulatedBackend()
    for obj in kueue_objects(gpus=gpus):
        if obj["kind"] == "ResourceFlavor":
            obj["spec"]["topologyName"] = "racks"
        backend.create(obj)
    backend.create(
        {
            "apiVersion": KUEUE,
            "kind": "Topology",
            "metadata": {"name": "racks"},
            "spec": {
                "levels": [
                    {"nodeLabel": "topology.berth.dev/block"},
                    {"nodeLabel": "topology.berth.dev/rack"},
                    {"nodeLabel": "kubernetes.io/hostname"},
                ]
            },
        }
    )
    ensure_nodes(backend)
    return backend


def in_one_rack(body: dict[str, Any], level: str = "required") -> dict[str, Any]:
    template = body["spec"]["template"]
    template.setdefault("metadata", {})["annotations"] = {
        f"kueue.x-k8s.io/podset-{level}-topology": "topology.berth.dev/rack"
    }
    return body


def test_a_gang_that_must_share_a_rack_waits_when_no_rack_holds_it(db: Any) -> None:
    """64 GPUs in two racks of 32: 5 nodes' worth in one rack never fits, though
    the quota has room; 4 nodes' worth goes into one rack, its pods recorded
    per node."""
    backend = topology_cluster(db, gpus=64)
    kueue = SimulatedKueue(backend, SPEEDUP)
    backend.create(in_one_rack(job("team-a", "wide", "main", 40, runtime=600)))
    backend.create(in_one_rack(job("team-a", "fits", "main", 32, runtime=600)))
    now = time.time()
    assert kueue.tick(now).admitted == ["team-a/job-fits"]
    wide = workload(backend, "wide")
    assert wide["spec"]["podSets"][0]["topologyRequest"] == {"required": "topology.berth.dev/rack"}
    message = next(
        c["message"] for c in wide["status"]["conditions"] if c["type"] == "QuotaReserved"
    )
    assert 'topology "racks" allows to fit only 4 out of 5 pod(s)' in message
    (assigned,) = workload(backend, "fits")["status"]["admission"]["podSetAssignments"]
    nodes = pods_per_node(assigned["topologyAssignment"])
    assert nodes is not None
    assert sum(nodes.values()) == 4
    racks = {
        (backend.get(TYPES["Node"], name) or {})["metadata"]["labels"]["topology.berth.dev/rack"]
        for name in nodes
    }
    assert len(racks) == 1

    # The next step keeps the placement: a second 4-node gang takes the other rack.
    backend.create(in_one_rack(job("team-a", "second", "main", 32, runtime=600)))
    assert kueue.tick(now + 1).admitted == ["team-a/job-second"]
    (assigned,) = workload(backend, "second")["status"]["admission"]["podSetAssignments"]
    second = pods_per_node(assigned["topologyAssignment"])
    assert second is not None and not set(second) & set(nodes)


def test_a_batch_job_with_a_minimum_parallelism_starts_with_fewer_pods(
    backend: SimulatedBackend,
) -> None:
    """Kueue's partial admission for batch Jobs (kueue.x-k8s.io/job-min-parallelism):
    8 GPUs, 6 of them busy, a job of 4 one-GPU pods that can start with 2."""
    kueue = SimulatedKueue(backend, SPEEDUP)
    backend.create(job("team-a", "busy", "main", 6, runtime=6000))
    now = time.time()
    kueue.tick(now)
    small = job("team-a", "flexible", "main", 1, runtime=600)
    small["spec"]["parallelism"] = small["spec"]["completions"] = 4
    small["metadata"]["annotations"]["kueue.x-k8s.io/job-min-parallelism"] = "2"
    backend.create(small)
    assert kueue.tick(now + 1).admitted == ["team-a/job-flexible"]
    flexible = workload(backend, "flexible")
    assert flexible["spec"]["podSets"][0]["minCount"] == 2
    (assignment,) = flexible["status"]["admission"]["podSetAssignments"]
    assert assignment["count"] == 2
    assert assignment["resourceUsage"]["nvidia.com/gpu"] == "2"
    # Read back next step: it holds 2 GPUs, not 4, so 8 are in use.
    kueue.tick(now + 2)
    assert gpu_usage(backend) == "8"


def test_admission_fair_sharing_prefers_the_local_queue_that_used_less(
    backend: SimulatedBackend,
) -> None:
    """Kueue's manager config turns admission fair sharing on; the ClusterQueue
    opts in. main's LocalQueue has been busy, so when capacity frees the newer
    job of the idle LocalQueue goes first; the usage is kept in the
    LocalQueue's status from step to step."""
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta1",
        "kind": "Configuration",
        "admissionFairSharing": {"usageHalfLifeTime": "10s", "usageSamplingInterval": "1s"},
    }
    backend.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
            "data": {"controller_manager_config.yaml": json.dumps(config)},
        }
    )
    queue = backend.get(TYPES["ClusterQueue"], "team-a")
    assert queue is not None
    queue["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    backend.replace(queue)
    backend.create(
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": "other", "namespace": "team-a"},
            "spec": {"clusterQueue": "team-a"},
        }
    )
    kueue = SimulatedKueue(backend, SPEEDUP)
    now = float(int(time.time()))
    backend.create(job("team-a", "heavy", "main", 8, runtime=600))  # 10 s at 60x
    assert kueue.tick(now).admitted == ["team-a/job-heavy"]
    kueue.tick(now + 5)
    main = backend.get(TYPES["LocalQueue"], "main", "team-a")
    assert main is not None
    consumed = main["status"]["fairSharing"]["admissionFairSharingStatus"]["consumedResources"]
    assert float(consumed["nvidia.com/gpu"]) > 2  # 8 GPUs for 5 s, half-life 10 s

    backend.create(job("team-a", "a-next", "main", 8, runtime=600))
    backend.create(job("team-a", "b-next", "other", 8, runtime=600))
    assert kueue.tick(now + 6).admitted == []
    assert kueue.tick(now + 10).admitted == ["team-a/job-b-next"]
