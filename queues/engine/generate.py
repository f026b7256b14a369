"""Generated workload streams: classes of jobs described statistically (arrival
process, run-time distribution, GPU counts, failures), expanded with a seed so
that two policies can be compared on exactly the same stream.

    generate:
      seed: 42
      classes:
        - name: small
          clusterQueues: ["*"]          # or a list of names
          countPerQueue: 350
          interval: 0.1                 # fixed spacing, or `rate:` for Poisson arrivals
          start: 0
          runtime: 0.2                  # or {median: 874, mean: 18000} for lognormal
          priority: 50                  # or a workloadPriorityClass name
          podSets: [{name: main, count: 1, requests: {cpu: 1}}]
          gpusPerJob: {choices: [1, 2, 4, 8], weights: [50, 20, 15, 15]}
          gpusPerPod: 8                 # pods of at most this many GPUs
          perGpu: {cpu: 24, memory: 256Gi}
          failFraction: 0.3             # this share fails early ...
          failAfter: 0.1                # ... after this share of its runtime
          checkpointInterval: 600

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from queues.engine.model import PodSet, Policy, Workload
from queues.engine.reading import Reader, read_seconds
from queues.engine.workloads import read_pod_sets, read_priority, read_requests

GPU = "nvidia.com/gpu"

CLASS_FIELDS = (
    "name",
    "clusterQueues",
    "countPerQueue",
    "interval",
    "rate",
    "start",
    "runtime",
    "priority",
    "podSets",
    "gpusPerJob",
    "gpusPerPod",
    "perGpu",
    "failFraction",
    "failAfter",
    "checkpointInterval",
    "namespace",
)


@dataclass(frozen=True)
class Runtime:
    """Fixed seconds, or lognormal with the given median and mean."""

    median: float
    mean: float | None = None

    def sample(self, rng: random.Random) -> float:
        if self.mean is None or self.mean <= self.median:
            return self.median
        # For a lognormal, median = e^mu and mean = e^(mu + sigma^2 / 2).
        sigma = math.sqrt(2 * math.log(self.mean / self.median))
        return rng.lognormvariate(math.log(self.median), sigma)


@dataclass(frozen=True)
class WorkloadClass:
    name: str
    cluster_queues: tuple[str, ...]
    count_per_queue: int
    runtime: Runtime
    priority: int
    pod_sets: tuple[PodSet, ...]
    seed: int
    interval: float | None = None
    rate: float | None = None
    start: float = 0.0
    gpus_per_job: tuple[tuple[int, ...], tuple[float, ...]] | None = None
    gpus_per_pod: int = 8
    per_gpu: dict[str, int] = field(default_factory=dict)
    fail_fraction: float = 0.0
    fail_after: float = 0.1
    checkpoint_interval: float | None = None
    namespace: str = "default"

    def workloads(self) -> Iterator[Workload]:
        """The class's workloads, in creation order per queue; deterministic."""
        for q_index, queue in enumerate(self.cluster_queues):
            rng = random.Random(f"{self.seed}/{self.name}/{q_index}")
            now = self.start
            for i in range(self.count_per_queue):
                if self.rate:
                    now += rng.expovariate(self.rate)
                elif i and self.interval is not None:
                    now += self.interval
                runtime = self.runtime.sample(rng)
                if self.fail_fraction and rng.random() < self.fail_fraction:
                    runtime *= self.fail_after
                yield Workload(
                    name=f"{self.name}-{queue}-{i}",
                    namespace=self.namespace,
                    cluster_queue=queue,
                    pod_sets=self._pod_sets(rng),
                    priority=self.priority,
                    creation_time=now,
                    runtime=runtime,
                    checkpoint_interval=self.checkpoint_interval,
                )

    def _pod_sets(self, rng: random.Random) -> tuple[PodSet, ...]:
        if self.gpus_per_job is None:
            return self.pod_sets
        choices, weights = self.gpus_per_job
        gpus = rng.choices(choices, weights=weights)[0]
        per_pod = min(gpus, self.gpus_per_pod)
        pods = math.ceil(gpus / per_pod)
        template = self.pod_sets[0]
        requests = dict(template.requests)
        requests[GPU] = per_pod
        for resource, amount in self.per_gpu.items():
            requests[resource] = amount * per_pod
        first = PodSet(template.name, pods, requests, template.node_selector, template.tolerations)
        return (first, *self.pod_sets[1:])

    @property
    def total(self) -> int:
        return self.count_per_queue * len(self.cluster_queues)


def parse_generate(
    reader: Reader,
    raw: Any,
    policy: Policy,
    priorities: Mapping[str, int],
    seed_override: int | None = None,
) -> list[WorkloadClass]:
    spec = reader.mapping("generate", raw, ("seed", "classes"))
    if not spec:
        return []
    seed = reader.integer("generate.seed", spec.get("seed"), 0) or 0
    if seed_override is not None:
        seed = seed_override
    classes: list[WorkloadClass] = []
    for i, entry in enumerate(reader.items("generate.classes", spec.get("classes"))):
        parsed = _parse_class(reader, f"generate.classes[{i}]", entry, policy, priorities, seed)
        if parsed is not None:
            classes.append(parsed)
    return classes


def _parse_class(
    reader: Reader, path: str, entry: Any, policy: Policy, priorities: Mapping[str, int], seed: int
) -> WorkloadClass | None:
    spec = reader.mapping(path, entry, CLASS_FIELDS)
    if not spec:
        return None
    name = reader.name(f"{path}.name", spec.get("name"), kind="label")
    queues_raw = spec.get("clusterQueues", ["*"])
    queues: list[str] = []
    for q, queue in enumerate(reader.items(f"{path}.clusterQueues", queues_raw)):
        if queue == "*":
            queues.extend(sorted(policy.cluster_queues))
        elif queue not in policy.cluster_queues:
            reader.error(
                f"{path}.clusterQueues[{q}]",
                "unknown-cluster-queue",
                f"no cluster queue named {queue!r}",
            )
        else:
            queues.append(queue)
    count = reader.integer(f"{path}.countPerQueue", spec.get("countPerQueue"))
    if count is None or count < 1:
        reader.error(f"{path}.countPerQueue", "required", "must be a whole number of at least 1")
        count = 0
    interval = read_seconds(reader, f"{path}.interval", spec.get("interval"))
    rate = reader.number(f"{path}.rate", spec.get("rate"))
    if (interval is None) == (rate is None):
        reader.error(
            path,
            "arrivals",
            "give exactly one of interval (fixed spacing, seconds) or "
            "rate (Poisson arrivals per second)",
        )
    if rate is not None and rate <= 0:
        reader.error(f"{path}.rate", "range", "must be more than 0")
        rate = None
    runtime = _runtime(reader, f"{path}.runtime", spec.get("runtime"))
    gpus = _gpu_distribution(reader, f"{path}.gpusPerJob", spec.get("gpusPerJob"))
    per_gpu = (
        read_requests(reader, f"{path}.perGpu", spec["perGpu"])
        if spec.get("perGpu") is not None
        else {}
    )
    fail_fraction = reader.number(f"{path}.failFraction", spec.get("failFraction"), 0.0) or 0.0
    if fail_fraction > 1:
        reader.error(f"{path}.failFraction", "range", "must be between 0 and 1")
    fail_after = reader.number(f"{path}.failAfter", spec.get("failAfter"), 0.1)
    gpus_per_pod = reader.integer(f"{path}.gpusPerPod", spec.get("gpusPerPod"), 8) or 8
    if gpus_per_pod < 1:
        reader.error(f"{path}.gpusPerPod", "range", "must be at least 1")
        gpus_per_pod = 8
    return WorkloadClass(
        name=name,
        cluster_queues=tuple(queues),
        count_per_queue=count,
        runtime=runtime,
        priority=read_priority(reader, f"{path}.priority", spec.get("priority"), priorities),
        pod_sets=read_pod_sets(
            reader,
            f"{path}.podSets",
            spec.get("podSets", [{}])
            if gpus is None
            else spec.get("podSets", [{"requests": {GPU: 1}}]),
        ),
        seed=seed,
        interval=interval,
        rate=rate,
        start=read_seconds(reader, f"{path}.start", spec.get("start")) or 0.0,
        gpus_per_job=gpus,
        gpus_per_pod=gpus_per_pod,
        per_gpu=per_gpu,
        fail_fraction=fail_fraction,
        fail_after=fail_after if fail_after is not None else 0.1,
        checkpoint_interval=read_seconds(
            reader, f"{path}.checkpointInterval", spec.get("checkpointInterval")
        ),
        namespace=str(spec.get("namespace", "default")),
    )


def _runtime(reader: Reader, path: str, raw: Any) -> Runtime:
    if isinstance(raw, Mapping):
        spec = reader.mapping(path, raw, ("median", "mean"))
        median = read_seconds(reader, f"{path}.median", spec.get("median"), required=True)
        mean = read_seconds(reader, f"{path}.mean", spec.get("mean"))
        if median is not None and mean is not None and mean < median:
            reader.error(f"{path}.mean", "range", "a lognormal's mean is at least its median")
        return Runtime(median or 0.0, mean)
    seconds = read_seconds(reader, path, raw, required=True)
    return Runtime(seconds or 0.0)


def _gpu_distribution(
    reader: Reader, path: str, raw: Any
) -> tuple[tuple[int, ...], tuple[float, ...]] | None:
    if raw is None:
        return None
    spec = reader.mapping(path, raw, ("choices", "weights"))
    choices = reader.items(f"{path}.choices", spec.get("choices"))
    weights = reader.items(f"{path}.weights", spec.get("weights", [1] * len(choices)))
    if not choices or any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in choices):
        reader.error(f"{path}.choices", "type", "must list whole GPU counts of at least 1")
        return None
    if (
        len(weights) != len(choices)
        or any(isinstance(w, bool) or not isinstance(w, int | float) or w < 0 for w in weights)
        or not sum(weights)
    ):
        reader.error(
            f"{path}.weights", "type", "must give one non-negative weight per choice, not all zero"
        )
        return None
    return tuple(choices), tuple(float(w) for w in weights)
