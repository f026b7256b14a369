"""What the rendering tests build specs from and read rendered jobs with."""

from __future__ import annotations

from typing import Any

from jobs.manifest_spec import JobSpec
from jobs.manifests import render_job
from tests.jobs.flavors import PLACEMENT

GPU = "nvidia.com/gpu"


def make(kind: str = "Job", **overrides: Any) -> JobSpec:
    values: dict[str, Any] = {
        "name": "train",
        "namespace": "research",
        "team": "research",
        "kind": kind,
        "image": "registry.example/trainer:1.0",
        "command": ["torchrun", "train.py", "--resume=auto"],
        "nodes": 4,
        "gpus_per_node": 8,
        "local_queue": "research",
        "priority_class": "train-high",
        "queue_class": "training-large",
        "env": {"LR": "3e-4"},
        "cpu_per_node_milli": 96_000,
        "memory_per_node_bytes": 1024 * 2**30,
        "checkpoint_uri": "s3://checkpoints/research/train",
        "max_runtime_seconds": 86_400,
        "retries": 3,
        "labels": {"project": "llama"},
        "annotations": {"example.com/owner": "ada"},
        "placement": PLACEMENT,
    }
    values.update(overrides)
    return JobSpec(**values)


def job_of(spec: JobSpec) -> dict[str, Any]:
    return render_job(spec)[0]


def pod_templates(job: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pod template in a rendered job (for a TrainJob: its runtime patch)."""
    spec = job["spec"]
    if job["kind"] == "Job":
        return [spec["template"]]
    if job["kind"] == "JobSet":
        return [r["template"]["spec"]["template"] for r in spec["replicatedJobs"]]
    if job["kind"] == "PyTorchJob":
        return [r["template"] for r in spec["pytorchReplicaSpecs"].values()]
    patch = spec["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    return [r["template"]["spec"]["template"] for r in patch["replicatedJobs"]]


def containers(job: dict[str, Any]) -> list[dict[str, Any]]:
    if job["kind"] == "TrainJob":
        return [job["spec"]["trainer"]]
    return [c for t in pod_templates(job) for c in t["spec"]["containers"]]


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def suspend_of(job: dict[str, Any]) -> Any:
    if job["kind"] == "PyTorchJob":
        return job["spec"]["runPolicy"]["suspend"]
    return job["spec"]["suspend"]


COMPLETION_INDEX = {
    "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
}
