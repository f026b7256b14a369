"""The job kinds the simulated cluster runs, as Kueue's job integrations and
the kinds' own controllers see them: which Workload pod sets a job asks for,
whether it is suspended, how to suspend or resume it, and how it reports
that it finished.

- batch/v1 Job: one pod set "main" of min(parallelism, completions) pods.
- JobSet: one pod set per replicated job, replicas x min(parallelism, completions).
- PyTorchJob: one per replica type, lower-case as Kueue names them ("master", "worker").
- TrainJob: one pod set "node" of numNodes pods asking for resourcesPerNode,
  with the placement of the runtime patches (the runtime itself is not simulated).

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(kind: str, status: bool, reason: str, message: str, now: float) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message[:32768],
        "lastTransitionTime": iso(now),
    }


def set_condition(obj: dict[str, Any], new: dict[str, Any]) -> None:
    """Replace the condition of that type, keeping its transition time when its
    status did not change (as Kubernetes' meta.SetStatusCondition does)."""
    conditions = obj.setdefault("status", {}).setdefault("conditions", [])
    for i, old in enumerate(conditions):
        if old["type"] == new["type"]:
            if old["status"] == new["status"]:
                new = {**new, "lastTransitionTime": old["lastTransitionTime"]}
            conditions[i] = new
            return
    conditions.append(new)


def has_condition(obj: Mapping[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions", [])
    )


@dataclass(frozen=True)
class PodSetTemplate:
    """One pod set of the Workload Kueue would create for the job."""

    name: str
    count: int
    template: dict[str, Any]
    min_count: int | None = None  # partial admission (a batch Job's min parallelism)

    def as_dict(self) -> dict[str, Any]:
        """The Workload's pod set, as Kueue's job framework builds it: the pod
        template's topology annotations become its topologyRequest."""
        pod_set: dict[str, Any] = {
            "name": self.name,
            "count": self.count,
            "template": self.template,
        }
        if self.min_count is not None and self.min_count < self.count:
            pod_set["minCount"] = self.min_count
        annotations = (self.template.get("metadata") or {}).get("annotations") or {}
        request = {
            kind: annotations[annotation]
            for kind, annotation in (
                ("required", REQUIRED_TOPOLOGY),
                ("preferred", PREFERRED_TOPOLOGY),
            )
            if annotations.get(annotation)
        }
        if request:
            pod_set["topologyRequest"] = request
        return pod_set


# Kueue's annotations: on a pod template, the topology level its pods share;
# on a batch Job, the fewest pods partial admission may start it with.
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"


def _pods(job_spec: Mapping[str, Any]) -> int:
    """Pods a batch JobSpec runs at once: parallelism, capped by completions."""
    parallelism = int(job_spec.get("parallelism", 1))
    return min(parallelism, int(job_spec.get("completions", parallelism)))


class JobKind:
    """A kind's rules. Subclasses say where suspend lives, the pod sets, and
    the finishing status; mutating methods change the dict they are given."""

    kind = ""
    api_version = ""
    # The condition types that mean the job is over, for good or bad.
    terminal: tuple[str, ...] = ("Failed",)
    # Reasons of the Suspended condition: (suspended, resumed).
    suspend_reasons = ("Suspended", "Resumed")

    def pod_sets(self, job: Mapping[str, Any]) -> list[PodSetTemplate]:
        raise NotImplementedError

    def suspended(self, job: Mapping[str, Any]) -> bool:
        return bool(job.get("spec", {}).get("suspend", False))

    def _write_suspend(self, job: dict[str, Any], suspended: bool) -> None:
        job.setdefault("spec", {})["suspend"] = suspended

    def set_suspended(self, job: dict[str, Any], suspended: bool, now: float) -> None:
        """Suspend (on eviction) or resume (on admission), with the status the
        kind's controller would report."""
        self._write_suspend(job, suspended)
        reason = self.suspend_reasons[0 if suspended else 1]
        message = f"{self.kind} {'suspended' if suspended else 'resumed'}"
        set_condition(job, condition("Suspended", suspended, reason, message, now))

    def finished(self, job: Mapping[str, Any]) -> bool:
        return any(has_condition(job, kind) for kind in self.terminal)

    def finish(self, job: dict[str, Any], now: float) -> None:
        """Mark the job succeeded, as its controller would."""
        raise NotImplementedError

    def workload_name(self, job: Mapping[str, Any]) -> str:
        """Kueue's prefix (it adds a hash of the UID, which the simulation leaves out)."""
        return f"{self.kind.lower()}-{job['metadata']['name']}"[:253]

    def owner_reference(self, job: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": job["metadata"]["name"],
            "uid": job["metadata"].get("uid", ""),
            "controller": True,
        }


class BatchJob(JobKind):
    kind = "Job"
    api_version = "batch/v1"
    terminal = ("Complete", "Failed")
    suspend_reasons = ("JobSuspended", "JobResumed")

    def pod_sets(self, job: Mapping[str, Any]) -> list[PodSetTemplate]:
        spec = job.get("spec", {})
        minimum = str((job.get("metadata") or {}).get("annotations", {}).get(MIN_PARALLELISM, ""))
        return [
            PodSetTemplate(
                "main",
                _pods(spec),
                spec.get("template", {}),
                int(minimum) if minimum.isdigit() and int(minimum) > 0 else None,
            )
        ]

    def finished(self, job: Mapping[str, Any]) -> bool:
        return bool((job.get("status") or {}).get("completionTime")) or super().finished(job)

    def set_suspended(self, job: dict[str, Any], suspended: bool, now: float) -> None:
        super().set_suspended(job, suspended, now)
        job["status"]["active"] = 0 if suspended else _pods(job["spec"])

    def finish(self, job: dict[str, Any], now: float) -> None:
        spec = job.get("spec", {})
        job.setdefault("status", {}).update(
            {
                "succeeded": int(spec.get("completions", spec.get("parallelism", 1))),
                "active": 0,
                "completionTime": iso(now),
            }
        )
        message = "Reached expected number of succeeded pods"
        for kind in ("SuccessCriteriaMet", "Complete"):
            set_condition(job, condition(kind, True, "CompletionsReached", message, now))


class JobSetKind(JobKind):
    kind = "JobSet"
    api_version = "jobset.x-k8s.io/v1alpha2"
    terminal = ("Completed", "Failed")

    def pod_sets(self, job: Mapping[str, Any]) -> list[PodSetTemplate]:
        sets = []
        for replicated in job.get("spec", {}).get("replicatedJobs", []):
            job_spec = replicated.get("template", {}).get("spec", {})
            count = int(replicated.get("replicas", 1)) * _pods(job_spec)
            sets.append(PodSetTemplate(replicated["name"], count, job_spec.get("template", {})))
        return sets

    def finish(self, job: dict[str, Any], now: float) -> None:
        job.setdefault("status", {})["terminalState"] = "Completed"
        set_condition(
            job,
            condition("Completed", True, "AllJobsCompleted", "jobset completed successfully", now),
        )


class PyTorchJobKind(JobKind):
    kind = "PyTorchJob"
    api_version = "kubeflow.org/v1"
    terminal = ("Succeeded", "Failed")
    suspend_reasons = ("PyTorchJobSuspended", "PyTorchJobResumed")
    # Kueue orders a PyTorchJob's pod sets master first.
    replica_types = ("Master", "Worker")

    def pod_sets(self, job: Mapping[str, Any]) -> list[PodSetTemplate]:
        replicas = job.get("spec", {}).get("pytorchReplicaSpecs", {})
        return [
            PodSetTemplate(
                name.lower(),
                int(replicas[name].get("replicas", 1)),
                replicas[name].get("template", {}),
            )
            for name in self.replica_types
            if name in replicas
        ]

    def suspended(self, job: Mapping[str, Any]) -> bool:
        return bool(job.get("spec", {}).get("runPolicy", {}).get("suspend", False))

    def _write_suspend(self, job: dict[str, Any], suspended: bool) -> None:
        job.setdefault("spec", {}).setdefault("runPolicy", {})["suspend"] = suspended

    def set_suspended(self, job: dict[str, Any], suspended: bool, now: float) -> None:
        super().set_suspended(job, suspended, now)
        reason = "PyTorchJobSuspended" if suspended else "PyTorchJobRunning"
        message = f"PyTorchJob {job['metadata']['name']} is " + (
            "suspended." if suspended else "running."
        )
        set_condition(job, condition("Running", not suspended, reason, message, now))

    def finish(self, job: dict[str, Any], now: float) -> None:
        name = job["metadata"]["name"]
        message = f"PyTorchJob {name} successfully completed."
        set_condition(job, condition("Running", False, "PyTorchJobSucceeded", message, now))
        set_condition(job, condition("Succeeded", True, "PyTorchJobSucceeded", message, now))
        job["status"]["completionTime"] = iso(now)


class TrainJobKind(JobKind):
    kind = "TrainJob"
    api_version = "trainer.kubeflow.org/v1alpha1"
    terminal = ("Complete", "Failed")
    # The trainer step of Kubeflow's torch runtimes (replicated job and container).
    node = "node"

    def pod_sets(self, job: Mapping[str, Any]) -> list[PodSetTemplate]:
        spec = job.get("spec", {})
        trainer = spec.get("trainer", {})
        metadata: dict[str, Any] = {}
        pod: dict[str, Any] = {}
        for patch in spec.get("runtimePatches", []):
            replicated = patch.get("trainingRuntimeSpec", {}).get("template", {})
            for entry in replicated.get("spec", {}).get("replicatedJobs", []):
                if entry.get("name") != self.node:
                    continue
                template = entry.get("template", {}).get("spec", {}).get("template", {})
                for key, value in template.get("metadata", {}).items():
                    metadata[key] = {**metadata.get(key, {}), **value}
                pod.update({k: v for k, v in template.get("spec", {}).items() if k != "containers"})
        container = {
            "name": self.node,
            "image": trainer.get("image", ""),
            "resources": trainer.get("resourcesPerNode", {}),
        }
        template = {"metadata": metadata, "spec": {**pod, "containers": [container]}}
        return [PodSetTemplate(self.node, int(trainer.get("numNodes", 1)), template)]

    def finish(self, job: dict[str, Any], now: float) -> None:
        set_condition(
            job, condition("Complete", True, "JobsCompleted", "TrainJob is completed", now)
        )


KINDS: dict[str, JobKind] = {
    k.kind: k for k in (BatchJob(), JobSetKind(), PyTorchJobKind(), TrainJobKind())
}


def kind_of(obj: Mapping[str, Any]) -> JobKind | None:
    """The job kind of an object (or of an owner reference), if it is one the
    simulated cluster runs."""
    kind = KINDS.get(str(obj.get("kind", "")))
    if kind is None or obj.get("apiVersion") != kind.api_version:
        return None
    return kind
