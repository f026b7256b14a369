"""A small load generator for the demo: team jobs arriving on the simulated
cluster, with GPU counts and run times shaped like public GPU-cluster traces
(mostly 1-GPU jobs, median run a quarter of an hour, a long tail)."""

from __future__ import annotations

import math
import random
from typing import Any

from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from queues.kueue.render import TEAM_LABEL
from queues.models import QueueClass
from queues.simulation.annotations import CHECKPOINT, RUNTIME
from queues.simulation.kueue import PRIORITY_LABEL, QUEUE_LABEL

GPU = "nvidia.com/gpu"
# Jobs per simulated hour, per team namespace: enough to keep a 64-GPU demo busy.
JOBS_PER_HOUR = 6.0
GPU_CHOICES = ([1, 2, 4, 8, 16], [50, 20, 15, 10, 5])
# A few arrivals go to the shared urgent-release queue, so the demo's approvers
# have requests to decide.
URGENT_SHARE = 0.02
URGENT_QUEUE = "urgent-release"
QUEUE_CLASS_LABEL = "berth.dev/queue-class"
MEDIAN_RUNTIME, MEAN_RUNTIME = 900.0, 3600.0


def _runtime(rng: random.Random) -> float:
    sigma = math.sqrt(2 * math.log(MEAN_RUNTIME / MEDIAN_RUNTIME))
    return min(rng.lognormvariate(math.log(MEDIAN_RUNTIME), sigma), 12 * 3600.0)


def job(
    namespace: str,
    name: str,
    queue: str,
    gpus: int,
    runtime: float,
    priority_class: str | None = None,
    *,
    spot: bool = True,
) -> dict[str, Any]:
    """A suspended batch Job as a team would submit it; ``spot``: it tolerates
    the spot taint (as Berth renders jobs of a queue class that runs on spot)."""
    per_pod = min(gpus, 8)
    pods = math.ceil(gpus / per_pod)
    labels = {QUEUE_LABEL: queue, "app.kubernetes.io/created-by": "berth-demo-load"}
    if priority_class:
        labels[PRIORITY_LABEL] = priority_class
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": {RUNTIME: str(int(runtime)), CHECKPOINT: "600"},
        },
        "spec": {
            "suspend": True,
            "parallelism": pods,
            "completions": pods,
            "completionMode": "Indexed",
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "tolerations": [
                        {"key": "berth.dev/spot", "operator": "Exists", "effect": "NoSchedule"}
                    ]
                    if spot
                    else [],
                    "containers": [
                        {
                            "name": "train",
                            "image": "registry.example/demo-trainer:1",
                            "resources": {
                                "requests": {
                                    "cpu": str(24 * per_pod),
                                    "memory": f"{256 * per_pod}Gi",
                                    GPU: str(per_pod),
                                }
                            },
                        }
                    ],
                }
            },
        },
    }


def generate(
    backend: SimulatedBackend, now: float, elapsed: float, rng: random.Random | None = None
) -> int:
    """Create the jobs that arrived over ``elapsed`` seconds of simulated work
    (Poisson arrivals per team namespace). Returns how many."""
    rng = rng or random.Random()
    namespaces = [
        n["metadata"]["name"]
        for n in backend.list(TYPES["Namespace"])[0]
        if n["metadata"].get("labels", {}).get(TEAM_LABEL)
    ]
    queues: dict[str, list[str]] = {}
    urgent: set[str] = set()
    spot_queues = _spot_queues(backend)
    by_local: dict[tuple[str, str], str] = {}
    for queue in backend.list(TYPES["LocalQueue"])[0]:
        namespace, name = queue["metadata"]["namespace"], queue["metadata"]["name"]
        by_local[(namespace, name)] = queue["spec"]["clusterQueue"]
        if name == URGENT_QUEUE:
            urgent.add(namespace)
        # The team's own queue, not the shared urgent one (which needs approval).
        elif queue["spec"]["clusterQueue"] == name:
            queues.setdefault(namespace, []).append(name)
    created = 0
    expected = JOBS_PER_HOUR * elapsed / 3600.0
    for namespace in sorted(namespaces):
        if namespace not in queues:
            continue
        arrivals = _poisson(rng, expected)
        for _ in range(arrivals):
            gpus = rng.choices(*GPU_CHOICES)[0]
            name = f"demo-{int(now)}-{rng.randrange(16**6):06x}"
            target = sorted(queues[namespace])[0]
            if namespace in urgent and rng.random() < URGENT_SHARE:
                target = URGENT_QUEUE
            cluster_queue = by_local.get((namespace, target), target)
            backend.create(
                job(
                    namespace,
                    name,
                    target,
                    gpus,
                    _runtime(rng),
                    spot=cluster_queue in spot_queues,
                )
            )
            created += 1
    return created


def _spot_queues(backend: SimulatedBackend) -> set[str]:
    """ClusterQueues whose queue class runs on spot: their jobs tolerate the
    spot taint, the others' do not, as Berth renders a team's jobs."""
    spot_classes = set(QueueClass.objects.filter(spot_allowed=True).values_list("name", flat=True))
    return {
        q["metadata"]["name"]
        for q in backend.list(TYPES["ClusterQueue"])[0]
        if q["metadata"].get("labels", {}).get(QUEUE_CLASS_LABEL) in spot_classes
    }


def _poisson(rng: random.Random, mean: float) -> int:
    if mean <= 0:
        return 0
    limit, count, product = math.exp(-mean), 0, rng.random()
    while product > limit:
        count += 1
        product *= rng.random()
    return count
