"""The dry run's "fits now" on the demo's topology-aware flavor agrees with
what the simulated cluster's Kueue does in its next step.

The demo's research queue is StrictFIFO (queue class training-large). On the
rack-aware ``h100-ondemand`` a gang whose pods each need a whole node fits
research's quota long before a whole node is free; as research's head it then
blocks everything behind it, as Kueue's StrictFIFO does. A small job behind it
fits the quota and the free nodes, but no cycle reaches it: the dry run must
not say it fits now. It once did (promising any job behind its queue's head
that fit), and with this flavor topology-aware a quarter of the demo's "fits
now: yes" were wrong (``bench/estimates.py``). The dry run reads only what
sync recorded (workloads, where their pods run, the nodes); the cluster
decides on its own objects, and the two must see the same free room.
"""

from __future__ import annotations

from datetime import UTC, datetime
from io import StringIO
from typing import Any

from django.core.management import call_command
from django.utils import timezone

from cluster.forecast import Candidate, Forecast, forecast_new, kueue_pod_sets, pod_sets_of
from cluster.snapshots import record_nodes
from cluster.state import cluster_state
from cluster.sync import sync_workloads
from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from queues.kueue.topology_assignment import pods_per_node
from queues.reconcile import reconcile
from queues.simulation.kueue import SimulatedKueue
from queues.simulation.load import job
from queues.simulation.nodes import ensure_nodes

GPU = "nvidia.com/gpu"
HOUR = 3600.0


class Demo:
    """The demo organisation on the simulated cluster, synced after every step."""

    def __init__(self, monkeypatch: Any) -> None:
        # One clock for the cluster's stamps, sync and the dry run, as on a cluster.
        self.now = datetime(2026, 11, 30, 9, 0, tzinfo=UTC).timestamp()
        monkeypatch.setattr(timezone, "now", lambda: self.at)
        call_command("seed_demo", "--quiet-logins", stdout=StringIO())
        self.backend = SimulatedBackend()
        assert reconcile(self.backend).status == "succeeded"
        ensure_nodes(self.backend)
        self.kueue = SimulatedKueue(self.backend, speedup=1.0)

    def submit(self, queue: str, name: str, gpus: int) -> dict[str, Any]:
        """A job of the demo load's shape (8 GPUs a node) in ``queue``'s namespace."""
        return self.backend.create(job(queue, name, queue, gpus, runtime=10 * HOUR, spot=False))

    def step(self) -> None:
        self.now += 1.0
        self.kueue.tick(self.now)
        sync_workloads(self.backend)
        record_nodes(self.backend.list(TYPES["Node"])[0], self.at)

    @property
    def at(self) -> datetime:
        return datetime.fromtimestamp(self.now, UTC)

    def dry_run(self, queue: str, name: str, gpus: int) -> Forecast:
        """What ``berth submit --dry-run`` answers for that job now."""
        body = job(queue, name, queue, gpus, runtime=10 * HOUR, spot=False)
        candidate = Candidate(
            name=name,
            namespace=queue,
            cluster_queue=queue,
            priority=0,
            pod_sets=pod_sets_of(kueue_pod_sets(body)),
        )
        return forecast_new(candidate, self.at)

    def admitted(self, queue: str, job_name: str) -> bool:
        """Whether Kueue admitted that job's Workload."""
        (found,) = [
            w
            for w in self.backend.list(TYPES["Workload"])[0]
            if w["metadata"]["namespace"] == queue
            and any(r.get("name") == job_name for r in w["metadata"].get("ownerReferences", []))
        ]
        return bool((found.get("status") or {}).get("admission"))

    def free_gpus(self) -> dict[str, int]:
        """Per on-demand node, the GPUs no admitted pod holds."""
        used: dict[str, int] = {}
        for w in self.backend.list(TYPES["Workload"])[0]:
            for assigned in ((w.get("status") or {}).get("admission") or {}).get(
                "podSetAssignments", []
            ):
                per_pod = int(
                    w["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"][
                        "requests"
                    ][GPU]
                )
                for node, pods in (
                    pods_per_node(assigned.get("topologyAssignment") or {}) or {}
                ).items():
                    used[node] = used.get(node, 0) + pods * per_pod
        return {
            n["metadata"]["name"]: int(n["status"]["allocatable"][GPU])
            - used.get(n["metadata"]["name"], 0)
            for n in self.backend.list(TYPES["Node"])[0]
            if "ondemand" in n["metadata"]["name"]
        }


def test_a_job_behind_research_s_rack_blocked_head_does_not_fit_now(
    db: Any, settings: Any, monkeypatch: Any
) -> None:
    settings.BERTH_RECONCILE_ON_CHANGE = False
    demo = Demo(monkeypatch)
    # Six on-demand nodes of 8 GPUs. Research runs four 6-GPU jobs and platform
    # two: 36 of 48 GPUs held, 2 free on every node.
    for index in range(4):
        demo.submit("research", f"six-{index}", 6)
    demo.submit("platform", "six-a", 6)
    demo.submit("platform", "six-b", 6)
    demo.step()
    assert sorted(demo.free_gpus().values()) == [2] * 6
    # The dry run's engine sees the pods where the cluster put them.
    placer = cluster_state(demo.at).scheduler.placer
    assert placer is not None
    seen = {node: 8 - placer.used.get(node, {}).get(GPU, 0) for node in demo.free_gpus()}
    assert seen == demo.free_gpus()
    # Research's head asks for one whole node: the quota has room (research
    # borrows 8 of the cohort's 12 free), no node has.
    demo.submit("research", "whole-node", 8)
    demo.step()
    assert not demo.admitted("research", "whole-node")
    head = demo.dry_run("research", "whole-node-again", 8)
    assert head.fits_now is False
    assert 'topology "gpu-racks"' in head.explanation["message"], head.explanation

    # One GPU behind it: room in the quota and on every node, but StrictFIFO.
    small = demo.dry_run("research", "one-gpu", 1)
    assert small.position == 2
    demo.submit("research", "one-gpu", 1)
    demo.step()
    assert not demo.admitted("research", "one-gpu")  # what Kueue does: nothing passes the head
    assert small.fits_now is False, small.explanation
    assert "no scheduling cycle reaches it" in small.explanation["message"]

    # Platform's queue is BestEffortFIFO: the same job there fits now, and is admitted.
    elsewhere = demo.dry_run("platform", "one-gpu", 1)
    assert elsewhere.fits_now is True, elsewhere.explanation
    demo.submit("platform", "one-gpu", 1)
    demo.step()
    assert demo.admitted("platform", "one-gpu")
