"""The engine's picture of a cluster: flavors, the cohort tree, ClusterQueues and
workloads, as plain immutable-by-convention dataclasses.

Amounts are canonical integers (milli-CPU, bytes, counts; see
``queues.quantity``); times are seconds on the engine's clock. Names follow
Kueue's API (v1beta2) so that a reader of Kueue's documentation recognises them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, Final

from mypy_extensions import mypyc_attr

from queues.engine.frozen_copies import rebuilt_by_fields
from queues.engine.topology import ClusterNode, Topology, TopologyRequest

# (flavor, resource). Variable-length in its type so that mypyc keeps it as
# the tuple object it is: as ``tuple[str, str]`` it is unpacked into fields
# and packed into a new tuple at every dict lookup, which then hashes it and
# compares it item by item with the key found.
FlavorResource = tuple[str, ...]

# One tuple per pair (``flavor_resource``), by flavor, then resource. Names
# come from policies and recorded jobs, a few dozen pairs; past these sizes
# (only unbounded input) a table starts again: an equal tuple is still found.
_FLAVOR_RESOURCES: Final[dict[str, dict[str, FlavorResource]]] = {}
_FLAVORS_KEPT: Final = 1024
_RESOURCES_KEPT: Final = 256


def flavor_resource(flavor: str, resource: str) -> FlavorResource:
    """The pair's one tuple: a dict keyed by flavor-resources finds it by
    identity, not by comparing items (the quota tree's cells, usage, the
    scheduler's reads). Two lookups of strings, whose hashes are kept, cost
    less than making a tuple and comparing it once."""
    by_resource = _FLAVOR_RESOURCES.get(flavor)
    if by_resource is None:
        if len(_FLAVOR_RESOURCES) >= _FLAVORS_KEPT:
            _FLAVOR_RESOURCES.clear()
        by_resource = _FLAVOR_RESOURCES[flavor] = {}
    known = by_resource.get(resource)
    if known is None:
        if len(by_resource) >= _RESOURCES_KEPT:
            by_resource.clear()
        # Declared, not narrowed to ``tuple[str, str]``: compiled, that would
        # be unboxed and boxed anew for the dict and for the caller.
        made: FlavorResource = (flavor, resource)
        by_resource[resource] = made
        return made
    return known


class QueueingStrategy(StrEnum):
    BEST_EFFORT_FIFO = "BestEffortFIFO"
    STRICT_FIFO = "StrictFIFO"


class WithinClusterQueue(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"


class ReclaimWithinCohort(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    ANY = "Any"


class BorrowWithinCohort(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


class FungibilityAction(StrEnum):
    MAY_STOP_SEARCH = "MayStopSearch"
    TRY_NEXT_FLAVOR = "TryNextFlavor"


class FungibilityPreference(StrEnum):
    NONE = ""
    BORROWING_OVER_PREEMPTION = "BorrowingOverPreemption"
    PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"


class StopPolicy(StrEnum):
    NONE = "None"
    HOLD = "Hold"
    HOLD_AND_DRAIN = "HoldAndDrain"


class CheckState(StrEnum):
    PENDING = "Pending"
    READY = "Ready"
    RETRY = "Retry"
    REJECTED = "Rejected"


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    @classmethod
    def from_kueue(cls, raw: Mapping[str, str]) -> Toleration:
        """From a pod template's toleration (Kubernetes' field names)."""
        return cls(
            raw.get("key", ""),
            raw.get("operator", "Equal"),
            raw.get("value", ""),
            raw.get("effect", ""),
        )

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' rule: empty effect matches every effect; empty key with
        Exists matches every taint."""
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class ResourceFlavor:
    name: str
    node_labels: dict[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_name: str | None = None  # a Kueue Topology: placement-aware


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class Quota:
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    flavor: str
    resources: dict[str, Quota]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class Preemption:
    within_cluster_queue: WithinClusterQueue = WithinClusterQueue.NEVER
    reclaim_within_cohort: ReclaimWithinCohort = ReclaimWithinCohort.NEVER
    borrow_within_cohort: BorrowWithinCohort = BorrowWithinCohort.NEVER
    max_priority_threshold: int | None = None


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class FlavorFungibility:
    when_can_borrow: FungibilityAction = FungibilityAction.MAY_STOP_SEARCH
    when_can_preempt: FungibilityAction = FungibilityAction.TRY_NEXT_FLAVOR
    preference: FungibilityPreference = FungibilityPreference.NONE


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class Cohort:
    name: str
    parent: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_sharing_weight: float = 1.0


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class ClusterQueue:
    name: str
    cohort: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    preemption: Preemption = Preemption()
    fair_sharing_weight: float = 1.0
    flavor_fungibility: FlavorFungibility = FlavorFungibility()
    # AdmissionCheck name -> the flavors it applies to (empty: every flavor)
    admission_checks: dict[str, tuple[str, ...]] = field(default_factory=dict)
    stop_policy: StopPolicy = StopPolicy.NONE
    # Kueue's admissionScope.admissionMode (admission fair sharing), as given.
    admission_mode: str | None = None


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class PodSet:
    name: str
    count: int
    requests: dict[str, int]  # per pod
    node_selector: dict[str, str] = field(default_factory=dict)
    # A tuple, but any sequence is taken (compiled, a tuple field refuses a
    # list; one given is kept, and the pod set is not shared: unhashable).
    tolerations: Sequence[Toleration] = ()
    # Kueue's partial admission: as few as this many pods will do (None: all).
    min_count: int | None = None
    # Pods together in one domain of a topology level (required or preferred).
    topology_request: TopologyRequest | None = None

    def total(self, count: int | None = None) -> dict[str, int]:
        pods = self.count if count is None else count
        return {resource: amount * pods for resource, amount in self.requests.items()}


# podSet -> resource -> flavor
Assignment = dict[str, dict[str, str]]

# Pod sets seen, by what they ask: workloads that ask alike share one tuple.
_POD_SETS: dict[tuple[object, ...], tuple[PodSet, ...]] = {}
# Past this many shapes the table starts again (a what-if of recorded jobs
# has a few dozen; only generated load could have more).
_POD_SETS_KEPT = 4096


def _shape(pod_set: Any) -> tuple[object, ...]:
    """What a pod set asks, read as given (``Any``: compiled, a declared type
    would be checked, and a list given for a tuple refused rather than kept)."""
    return (
        pod_set.name,
        pod_set.count,
        # With each amount's type: 1 and 1.0 are equal keys, not the same request.
        tuple((resource, type(amount), amount) for resource, amount in pod_set.requests.items()),
        tuple(pod_set.node_selector.items()),
        pod_set.tolerations,
        pod_set.min_count,
        pod_set.topology_request,
    )


def shared_pod_sets(pod_sets: Iterable[PodSet]) -> tuple[PodSet, ...]:
    """An equal tuple of pod sets, the same object for every workload asking
    the same. Pod sets are frozen and nothing changes their requests, so
    sharing them changes no answer (``Workload.copied`` shares them too)."""
    pod_sets = tuple(pod_sets)  # read twice below: a generator would give nothing the second time
    shape = tuple(_shape(p) for p in pod_sets)
    try:
        known = _POD_SETS.get(shape)
    except TypeError:  # something unhashable given where a tuple belongs: kept as given
        return pod_sets
    if known is not None:
        return known
    if len(_POD_SETS) >= _POD_SETS_KEPT:
        _POD_SETS.clear()
    _POD_SETS[shape] = pod_sets
    return pod_sets


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(slots=True)
class Workload:
    """A job's request for quota. Mutable: the engine records its admission,
    evictions and check states on it as time passes."""

    name: str
    cluster_queue: str
    # Held as a tuple shared by workloads asking alike (``__post_init__``);
    # given as any sequence, or a generator: compiled, a field typed as a
    # tuple would refuse a list before it could be made one.
    pod_sets: Sequence[PodSet]
    priority: int = 0
    creation_time: float = float("-inf")
    namespace: str = "default"
    runtime: float | None = None
    # With no declared runtime: how long it plausibly runs in all, (short, long),
    # from what similar work took (start estimates play both ends).
    runtime_range: tuple[float, float] | None = None
    checkpoint_interval: float | None = None
    # Kueue's maximumExecutionTimeSeconds: admitted longer than this in all
    # (``past_execution`` is what earlier admissions used) and it is deactivated.
    max_execution_time: float | None = None
    past_execution: float = 0.0
    # Quota held: which flavor each pod set's resources use (None: pending).
    admission: Assignment | None = None
    admitted_at: float | None = None
    # Time the workload entered (or re-entered) its queue; orders FIFO queues.
    queued_at: float | None = None
    check_states: dict[str, CheckState] = field(default_factory=dict)
    # requeueAfterSeconds per check, as its controller asked with a Retry.
    check_retry_after: dict[str, float] = field(default_factory=dict)
    active: bool = True
    # Evicted but still holding quota (its job is stopping); preempted first.
    evicting: bool = False
    evictions: int = 0
    work_done: float = 0.0  # seconds of runtime completed so far (kept across requeues)
    # Seconds from admission until all its pods are ready (infinite: never, say
    # a gang no node set can hold); its runtime counts from then.
    pods_ready_after: float = 0.0
    # Kueue's status.requeueState: not a candidate before ``requeue_at``;
    # ``requeue_count`` backoffs so far (waitForPodsReady).
    requeue_at: float | None = None
    requeue_count: int = 0
    local_queue: str = ""  # its LocalQueue in its namespace (admission fair sharing)
    # Pods admitted per pod set when fewer than asked (partial admission).
    admitted_counts: dict[str, int] | None = None
    # Where an admitted workload's pods are, per pod set: node -> pods (Kueue's
    # topologyAssignment; None: placed by the engine when it admits).
    topology_assignment: dict[str, dict[str, int]] | None = None
    # namespace/name, kept: the scheduler looks it up millions of times a replay.
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # A replay holds a million of these at once, most alike: their queue,
        # namespace and pod sets are shared, not held once each.
        self.cluster_queue = sys.intern(self.cluster_queue)
        self.namespace = sys.intern(self.namespace)
        self.pod_sets = shared_pod_sets(self.pod_sets)
        self.key = f"{self.namespace}/{self.name}"

    def copied(self) -> Workload:
        """An independent copy for another replay: its own state, the pod sets
        shared (frozen, and nothing changes their requests). A replay starts
        from fresh copies of every workload, and deepcopy cost seconds of it."""
        twin = Workload.__new__(Workload)  # not object.__new__: a compiled class refuses it
        for name in _WORKLOAD_SLOTS:
            setattr(twin, name, getattr(self, name))
        if self.admission is not None:
            twin.admission = {name: dict(flavors) for name, flavors in self.admission.items()}
        twin.check_states = dict(self.check_states)
        twin.check_retry_after = dict(self.check_retry_after)
        if self.admitted_counts is not None:
            twin.admitted_counts = dict(self.admitted_counts)
        if self.topology_assignment is not None:
            twin.topology_assignment = {
                name: dict(nodes) for name, nodes in self.topology_assignment.items()
            }
        return twin

    @property
    def queue_order_time(self) -> float:
        return self.queued_at if self.queued_at is not None else self.creation_time

    @property
    def has_quota(self) -> bool:
        return self.admission is not None

    @property
    def is_admitted(self) -> bool:
        """Quota reserved and every admission check Ready."""
        return self.admission is not None and all(
            state is CheckState.READY for state in self.check_states.values()
        )

    def usage(self) -> dict[FlavorResource, int]:
        """What the workload holds, by flavor × resource (empty when pending).
        ``pods`` counts each pod set's pods when its queue assigned it a flavor."""
        held: dict[FlavorResource, int] = {}
        if self.admission is None:
            return held
        counts = self.admitted_counts or {}
        for pod_set in self.pod_sets:
            count = counts.get(pod_set.name, pod_set.count)
            flavors = self.admission.get(pod_set.name)
            if not flavors:
                continue
            requests = pod_set.requests  # per pod (``PodSet.total`` makes a dict)
            for resource, flavor in flavors.items():
                amount = count if resource == "pods" else requests.get(resource, 0) * count
                key = flavor_resource(flavor, resource)
                held[key] = held.get(key, 0) + amount
        return held


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class WaitForPodsReady:
    """Kueue's waitForPodsReady: an admitted workload whose pods are not all
    ready within ``timeout`` is evicted and requeued after a backoff of
    ``backoff_base * 2^(n-1)`` seconds (capped at ``backoff_max``) for its n-th
    time; past ``backoff_limit`` requeues it is deactivated."""

    timeout: float = 300.0
    block_admission: bool = False
    # Which time orders it in its queue once requeued: "Eviction" or "Creation".
    timestamp: str = "Eviction"
    backoff_limit: int | None = None  # None: requeued for ever
    backoff_base: float = 60.0
    backoff_max: float = 3600.0

    def backoff(self, count: int) -> float:
        return min(self.backoff_base * 2 ** max(0, count - 1), self.backoff_max)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class AdmissionFairSharing:
    half_life: float
    sampling_interval: float = 300.0
    resource_weights: Mapping[str, float] = field(default_factory=dict)

    def alpha(self, elapsed: float) -> float:
        if self.half_life <= 0:
            return 0.0
        return 1.0 - 0.5 ** (max(0.0, elapsed) / self.half_life)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class Policy:
    """Everything the engine needs to know about the cluster's policy."""

    flavors: dict[str, ResourceFlavor]
    cohorts: dict[str, Cohort]
    cluster_queues: dict[str, ClusterQueue]
    fair_sharing: bool = False
    # Kueue's fairSharing.preemptionStrategies, tried in order.
    fair_sharing_strategies: tuple[str, ...] = (
        "LessThanOrEqualToFinalShare",
        "LessThanInitialShare",
    )
    wait_for_pods_ready: WaitForPodsReady | None = None
    # Kueue's admissionFairSharing (None: off): ClusterQueues whose
    # admissionScope opts in order their pending work by LocalQueue usage.
    admission_fair_sharing: AdmissionFairSharing | None = None
    # Topology-aware scheduling: Kueue's Topology objects, and the cluster's
    # nodes that topology-aware flavors place pods on.
    topologies: dict[str, Topology] = field(default_factory=dict)
    nodes: tuple[ClusterNode, ...] = ()


# Every field of a Workload, for Workload.copied (slots: there is no __dict__ to copy).
_WORKLOAD_SLOTS = tuple(f.name for f in fields(Workload))

rebuilt_by_fields(
    Taint,
    Toleration,
    ResourceFlavor,
    Quota,
    FlavorQuotas,
    ResourceGroup,
    Preemption,
    FlavorFungibility,
    Cohort,
    ClusterQueue,
    PodSet,
    WaitForPodsReady,
    AdmissionFairSharing,
    Policy,
)
