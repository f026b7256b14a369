"""Kueue's admission fair sharing: within a ClusterQueue whose admissionScope
says ``UsageBasedAdmissionFairSharing``, pending workloads are taken in order
of their LocalQueue's recent usage (lowest first), then as usual (priority,
time). A LocalQueue's consumed resources decay with the configured half-life:
every sampling interval they move towards what it holds now by
``alpha = 1 - 0.5^(elapsed / halfLife)``; an admission adds an entry penalty
(its requests times the sampling interval's alpha) until the next sample, so
one LocalQueue cannot take several turns in a row between samples.

Usage is the sum over resources of weight × amount, in Kueue's units (cores,
bytes, counts), divided by the LocalQueue's weight (1 here: Berth does not
keep LocalQueue weights).

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from mypy_extensions import mypyc_attr

from queues.engine.model import AdmissionFairSharing, Workload
from queues.quantity import QuantityError, parse_decimal

MILLI: Final = {"cpu"}  # the engine keeps these in thousandths; Kueue counts cores


def consumed_from_status(saved: Mapping[str, Any]) -> dict[str, float]:
    """A LocalQueue's ``status.fairSharing.admissionFairSharingStatus``
    ``consumedResources`` (Kubernetes quantities: ``1500m`` is 1.5 cores)."""
    consumed: dict[str, float] = {}
    for resource, value in (saved.get("consumedResources") or {}).items():
        try:
            consumed[str(resource)] = float(parse_decimal(value))
        except QuantityError:
            continue
    return consumed


def local_queue_of(workload: Workload) -> str:
    return f"{workload.namespace}/{workload.local_queue}"


def _amounts(usage: Mapping[str, float]) -> dict[str, float]:
    return {r: a / 1000 if r in MILLI else float(a) for r, a in usage.items()}


def requests_of(workload: Workload) -> dict[str, float]:
    """What it asks for in all, per resource (admitted counts when partial)."""
    counts = workload.admitted_counts or {}
    total: dict[str, float] = {}
    for pod_set in workload.pod_sets:
        for resource, amount in pod_set.total(counts.get(pod_set.name)).items():
            total[resource] = total.get(resource, 0.0) + amount
    return _amounts(total)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class UsageLedger:
    """Consumed resources and pending entry penalties per LocalQueue."""

    def __init__(self, config: AdmissionFairSharing, now: float) -> None:
        self.config = config
        self.consumed: dict[str, dict[str, float]] = {}
        self.penalty: dict[str, dict[str, float]] = {}
        self.last_sample = now

    def usage(self, local_queue: str) -> float:
        weights = self.config.resource_weights
        total = 0.0
        for part in (self.consumed.get(local_queue, {}), self.penalty.get(local_queue, {})):
            for resource, amount in part.items():
                total += weights.get(resource, 1.0) * amount
        return total

    def admitted(self, workload: Workload) -> None:
        """An admission's entry penalty, until the next sample settles it."""
        alpha = self.config.alpha(self.config.sampling_interval)
        penalty = self.penalty.setdefault(local_queue_of(workload), {})
        for resource, amount in requests_of(workload).items():
            penalty[resource] = penalty.get(resource, 0.0) + amount * alpha

    def sample(self, now: float, holding: Iterable[Workload]) -> None:
        """Decay every LocalQueue's consumption towards what it holds now."""
        held: dict[str, dict[str, float]] = {}
        for workload in holding:
            into = held.setdefault(local_queue_of(workload), {})
            for resource, amount in requests_of(workload).items():
                into[resource] = into.get(resource, 0.0) + amount
        alpha = self.config.alpha(now - self.last_sample)
        for local_queue in set(self.consumed) | set(held):
            old, new = self.consumed.get(local_queue, {}), held.get(local_queue, {})
            self.consumed[local_queue] = {
                r: old.get(r, 0.0) * (1 - alpha) + new.get(r, 0.0) * alpha for r in {*old, *new}
            }
        self.penalty.clear()
        self.last_sample = now
