"""Kueue's part on the real API server, where no Kueue runs: the Workload its
job integration makes for a job, and the status its scheduler writes — quota
reserved and admitted, evicted and requeued, finished — written as the
cluster's admin with Kueue's own field manager, and the Workload deleted as
Kueue does when its job goes. Used by the watch-and-relist test and by
``bench/freshness.py --cluster envtest``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tests.envtest.cluster import EnvtestCluster

KUEUE = "kueue.x-k8s.io/v1beta2"


def stamp() -> str:
    """Now, as a condition's lastTransitionTime (RFC 3339, whole seconds)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(kind: str, status: bool, reason: str, message: str, at: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": at,
    }


class KueuePlayer:
    """Writes what Kueue would for Berth's jobs on ``kube`` (as its admin)."""

    def __init__(self, kube: EnvtestCluster, cluster_queue: str = "research") -> None:
        self.kube = kube
        self.cluster_queue = cluster_queue

    def workload_for(self, job: dict[str, Any], suffix: str = "1a2b3") -> str:
        """Kueue's job integration: a pending Workload owned by ``job`` (a batch
        Job as the server returned it). Returns the Workload's name."""
        meta = job["metadata"]
        name = f"job-{meta['name']}-{suffix}"
        self.kube.add_foreign(
            {
                "apiVersion": KUEUE,
                "kind": "Workload",
                "metadata": {
                    "name": name,
                    "namespace": meta["namespace"],
                    "ownerReferences": [
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "name": meta["name"],
                            "uid": meta["uid"],
                        }
                    ],
                },
                "spec": {
                    "queueName": meta["labels"]["kueue.x-k8s.io/queue-name"],
                    "podSets": [
                        {
                            "name": "main",
                            "count": int(job["spec"].get("parallelism") or 1),
                            "template": job["spec"]["template"],
                        }
                    ],
                },
            }
        )
        return name

    def _status(self, name: str, namespace: str, status: dict[str, Any]) -> dict[str, Any]:
        return self.kube.set_status("Workload", name, status, namespace=namespace)

    def pending(self, name: str, namespace: str, why: str = "couldn't assign flavors") -> None:
        at = stamp()
        self._status(
            name,
            namespace,
            {"conditions": [condition("QuotaReserved", False, "Pending", why, at)]},
        )

    def admit(self, name: str, namespace: str, gpus: int = 8) -> None:
        """Quota reserved and admitted in one scheduling cycle."""
        at = stamp()
        self._status(
            name,
            namespace,
            {
                "admission": {
                    "clusterQueue": self.cluster_queue,
                    "podSetAssignments": [
                        {
                            "name": "main",
                            "count": 1,
                            "flavors": {"nvidia.com/gpu": "h100"},
                            "resourceUsage": {"nvidia.com/gpu": str(gpus)},
                        }
                    ],
                },
                "conditions": [
                    condition(
                        "QuotaReserved",
                        True,
                        "QuotaReserved",
                        f"Quota reserved in ClusterQueue {self.cluster_queue}",
                        at,
                    ),
                    condition("Admitted", True, "Admitted", "The workload is admitted", at),
                ],
            },
        )

    def evict(self, name: str, namespace: str) -> None:
        """Evicted (its node failed) and back in the queue, without quota."""
        at = stamp()
        self._status(
            name,
            namespace,
            {
                "conditions": [
                    condition("QuotaReserved", False, "Pending", "evicted", at),
                    condition("Admitted", False, "NoReservation", "evicted", at),
                    condition("Evicted", True, "NodeFailures", "the node went away", at),
                    condition("Requeued", True, "NodeFailures", "requeued", at),
                ]
            },
        )

    def finish(self, name: str, namespace: str) -> None:
        at = stamp()
        current = self.kube.get("Workload", name, namespace) or {}
        status = dict(current.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "Finished"] + [
            condition("Finished", True, "Succeeded", "Job finished successfully", at)
        ]
        self._status(name, namespace, {**status, "conditions": conditions})

    def delete(self, name: str, namespace: str) -> None:
        self.kube.remove("Workload", name, namespace)
