"""Flavor assignment: which flavor each pod set's resources would use, and
whether that fits now, needs preemption, or can never fit.

Follows Kueue v0.19's flavor assigner: pod sets in spec order, each resource
group searched in its listed flavor order, taints (against the pod's and the
flavor's tolerations) and node selectors checked first, then quota; the stop
rule and the preference between flavors come from flavor fungibility.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

from mypy_extensions import mypyc_attr

from queues.engine.messages import kubernetes_quantity, request_order
from queues.engine.model import (
    BorrowWithinCohort,
    ClusterQueue,
    FlavorResource,
    FungibilityAction,
    FungibilityPreference,
    PodSet,
    Policy,
    ReclaimWithinCohort,
    ResourceFlavor,
    ResourceGroup,
    Workload,
    flavor_resource,
)
from queues.engine.quota import CellReading, Node
from queues.engine.topology import Placer, add_pods


class Mode(IntEnum):
    """Kueue's internal ranking of how a flavor-resource can be satisfied."""

    NO_FIT = 0
    NO_CANDIDATES = 1  # needs preemption, but nothing may be preempted
    PREEMPT = 2  # needs preemption inside its own ClusterQueue
    RECLAIM = 3  # needs preemption only in other ClusterQueues
    FIT = 4


# (workload, flavor-resource, amount needed) -> (mode, borrowing level after preemption)
Oracle = Callable[[Workload, FlavorResource, int], tuple[Mode, int]]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class QuotaCheck:
    """One flavor × resource examined for a pod set: the numbers behind the
    verdict, kept for explanations."""

    flavor: str
    resource: str
    requested: int  # this pod set's request plus earlier pod sets' in the same flavor
    available: int
    potential: int
    nominal: int
    borrowing_limit: int | None
    mode: Mode
    borrow: int

    # Stated, not generated: made by the million (see queues.engine.compiled).
    def __init__(
        self,
        flavor: str,
        resource: str,
        requested: int,
        available: int,
        potential: int,
        nominal: int,
        borrowing_limit: int | None,
        mode: Mode,
        borrow: int,
    ) -> None:
        self.flavor = flavor
        self.resource = resource
        self.requested = requested
        self.available = available
        self.potential = potential
        self.nominal = nominal
        self.borrowing_limit = borrowing_limit
        self.mode = mode
        self.borrow = borrow


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class FlavorOutcome:
    """How one flavor would serve a resource group: the worst mode over its
    resources, the highest borrowing level, and each resource's own mode."""

    flavor: str
    mode: Mode
    borrow: int
    resource_modes: dict[str, Mode]
    # Where its pods would go on a topology-aware flavor (node -> pods).
    nodes: dict[str, int] = field(default_factory=dict)

    def __init__(
        self,
        flavor: str,
        mode: Mode,
        borrow: int,
        resource_modes: dict[str, Mode],
        nodes: dict[str, int] | None = None,
    ) -> None:
        self.flavor = flavor
        self.mode = mode
        self.borrow = borrow
        self.resource_modes = resource_modes
        self.nodes = {} if nodes is None else nodes


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class PodSetAssignment:
    name: str
    flavors: dict[str, str] = field(default_factory=dict)  # resource -> flavor
    mode: Mode = Mode.FIT
    borrow: int = 0
    reasons: list[str] = field(default_factory=list)
    checks: list[QuotaCheck] = field(default_factory=list)
    skipped_flavors: dict[str, str] = field(default_factory=dict)  # flavor -> why
    # Per resource group searched: flavor -> why it could not be used
    # (NoMatchingFlavor, ExceedsMaxQuota, WaitingForQuota).
    attempts: list[dict[str, str]] = field(default_factory=list)

    def __init__(
        self,
        name: str,
        flavors: dict[str, str] | None = None,
        mode: Mode = Mode.FIT,
        borrow: int = 0,
        reasons: list[str] | None = None,
        checks: list[QuotaCheck] | None = None,
        skipped_flavors: dict[str, str] | None = None,
        attempts: list[dict[str, str]] | None = None,
    ) -> None:
        self.name = name
        self.flavors = {} if flavors is None else flavors
        self.mode = mode
        self.borrow = borrow
        self.reasons = [] if reasons is None else reasons
        self.checks = [] if checks is None else checks
        self.skipped_flavors = {} if skipped_flavors is None else skipped_flavors
        self.attempts = [] if attempts is None else attempts


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class Assignment:
    pod_sets: list[PodSetAssignment]
    usage: dict[FlavorResource, int]
    # flavor-resources whose assignment needs preemption
    contested: set[FlavorResource]
    # Pods per pod set when partial admission reduced them (None: as asked).
    counts: dict[str, int] | None = None

    # Worked out once: the pod sets are final when the assignment is made, and a
    # reused nomination is ordered and checked in every cycle. Kept in fields,
    # not functools.cached_property: compiled (mypyc), that works it out anew
    # at every read.
    _mode: Mode | None = field(default=None, init=False, repr=False, compare=False)
    _borrowing: int | None = field(default=None, init=False, repr=False, compare=False)

    def __init__(
        self,
        pod_sets: list[PodSetAssignment],
        usage: dict[FlavorResource, int],
        contested: set[FlavorResource],
        counts: dict[str, int] | None = None,
    ) -> None:
        self.pod_sets = pod_sets
        self.usage = usage
        self.contested = contested
        self.counts = counts
        # Compiled, a field the constructor does not set is left unset.
        self._mode = None
        self._borrowing = None

    @property
    def mode(self) -> Mode:
        mode = self._mode
        if mode is None:
            # A loop, not min() over a generator: compiled, that is a call
            # of a generator object (3,700 instructions a nomination).
            mode = Mode.FIT
            for pod_set in self.pod_sets:
                if pod_set.mode < mode:
                    mode = pod_set.mode
            self._mode = mode
        return mode

    @property
    def borrowing(self) -> int:
        borrowing = self._borrowing
        if borrowing is None:
            borrowing = self._borrowing = max((p.borrow for p in self.pod_sets), default=0)
        return borrowing

    @property
    def fits(self) -> bool:
        return self.mode is Mode.FIT

    @property
    def needs_preemption(self) -> bool:
        # By identity, not ``NO_FIT < mode < FIT``: compiled, an IntEnum's
        # comparison goes through the generic rich compare, and this is
        # asked of every head at every cycle.
        mode = self.mode
        return mode is not Mode.NO_FIT and mode is not Mode.FIT

    def flavors(self) -> dict[str, dict[str, str]]:
        return {p.name: dict(p.flavors) for p in self.pod_sets}

    def message(self) -> str:
        """Kueue's text: per failing pod set, its reasons sorted and joined."""
        parts = [
            f"couldn't assign flavors to pod set {p.name}: {', '.join(sorted(p.reasons))}"
            for p in self.pod_sets
            if p.mode is not Mode.FIT
        ]
        return "; ".join(parts)


def more_needed(flavor: str, resource: str, missing: int) -> str:
    return (
        f"insufficient unused quota for {resource} in flavor {flavor}, "
        f"{kubernetes_quantity(resource, missing)} more needed"
    )


def refreshed(assignment: Assignment, available: dict[FlavorResource, int]) -> Assignment:
    """``assignment`` as its assigner would make it with ``available`` as
    the quota checks' available figures, when nothing else it read differs:
    each request fits or not as it did, at the same borrowing levels, and
    every check that asked the oracle was told, again, of no victims (its
    borrowing level then is the one read). Then the flavors, modes and
    reasons are the same and only the figures change: each check's available
    amount, and what a reason says is missing."""
    pod_sets = []
    for old in assignment.pod_sets:
        checks = []
        reworded: dict[str, str] = {}
        for check in old.checks:
            flavor, resource, asked = check.flavor, check.resource, check.requested
            now = available.get((flavor, resource), check.available)
            if now != check.available:
                if check.available < asked <= check.potential:
                    was = more_needed(flavor, resource, asked - check.available)
                    reworded[was] = more_needed(flavor, resource, asked - now)
                check = QuotaCheck(
                    flavor,
                    resource,
                    asked,
                    now,
                    check.potential,
                    check.nominal,
                    check.borrowing_limit,
                    check.mode,
                    check.borrow,
                )
            checks.append(check)
        reasons = [reworded.get(r, r) for r in old.reasons] if reworded else list(old.reasons)
        # What is not a figure is shared: nothing changes an assignment once made.
        pod_sets.append(
            PodSetAssignment(
                old.name,
                old.flavors,
                old.mode,
                old.borrow,
                reasons,
                checks,
                old.skipped_flavors,
                old.attempts,
            )
        )
    return Assignment(pod_sets, assignment.usage, assignment.contested, assignment.counts)


def pod_set_requests(pod_set: PodSet, queue: ClusterQueue) -> dict[str, int]:
    """Total requests; ``pods`` counts only when the ClusterQueue covers it."""
    # PodSet.total, written out: asked for every pod set of every fresh
    # nomination, with ``pods`` added where the queue covers it.
    count = pod_set.count
    requests = {resource: amount * count for resource, amount in pod_set.requests.items()}
    if any("pods" in group.covered_resources for group in queue.resource_groups):
        requests["pods"] = pod_set.count
    return requests


def untolerated_taint(pod_set: PodSet, flavor: ResourceFlavor) -> str | None:
    tolerations = (*pod_set.tolerations, *flavor.tolerations)
    for taint in flavor.node_taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            shown = f"{{{taint.key} {taint.value} {taint.effect} <nil>}}"  # Go's struct print
            return f"untolerated taint {shown} in flavor {flavor.name}"
    return None


def selector_mismatch(pod_set: PodSet, flavor: ResourceFlavor) -> str | None:
    """Only keys the flavor labels are compared; other selector keys are the
    node scheduler's business, not the flavor's."""
    for key, value in pod_set.node_selector.items():
        if key in flavor.node_labels and flavor.node_labels[key] != value:
            return f"flavor {flavor.name} doesn't match node affinity"
    return None


def _preferred(
    a: tuple[Mode, int], b: tuple[Mode, int] | None, preference: FungibilityPreference
) -> bool:
    """Whether flavor outcome ``a`` beats ``b`` (the best so far)."""
    if a[0] is Mode.NO_FIT:
        return False
    if b is None or b[0] is Mode.NO_FIT:
        return True
    if (a[0] is Mode.NO_CANDIDATES) != (b[0] is Mode.NO_CANDIDATES):
        return b[0] is Mode.NO_CANDIDATES
    if preference is FungibilityPreference.PREEMPTION_OVER_BORROWING:
        return (a[1], -a[0]) < (b[1], -b[0])
    return (-a[0], a[1]) < (-b[0], b[1])


def _try_next(mode: Mode, borrow: int, queue: ClusterQueue) -> bool:
    fungibility = queue.flavor_fungibility
    if mode in (Mode.NO_FIT, Mode.NO_CANDIDATES):
        return True
    if mode in (Mode.PREEMPT, Mode.RECLAIM) and (
        fungibility.when_can_preempt is FungibilityAction.TRY_NEXT_FLAVOR
    ):
        return True
    return borrow > 0 and fungibility.when_can_borrow is FungibilityAction.TRY_NEXT_FLAVOR


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class FlavorAssigner:
    """Assigns flavors for one workload in one ClusterQueue against the tree's
    current usage. ``oracle`` simulates preemption for one flavor-resource."""

    def __init__(
        self,
        policy: Policy,
        queue: ClusterQueue,
        node: Node,
        oracle: Oracle,
        placer: Placer | None = None,
    ) -> None:
        self.policy = policy
        self.queue = queue
        self.node = node
        self.oracle = oracle
        self.placer = placer
        # Node room the workload's earlier pod sets took (node -> resource ->
        # amount): Kueue places a workload's pod sets one after another.
        self.taken: dict[str, dict[str, int]] = {}
        # What the assignment read of the quota tree's usage: per quota check,
        # the flavor-resource, the amount asked, what was available and (unless
        # it could never fit) the borrowing level. The rest it reads is static,
        # but for the oracle's victim searches (the scheduler's witness holds
        # what those read: witness.Witness).
        self.reads: list[CellReading] = []
        self.group_of: dict[str, ResourceGroup] = {
            resource: group
            for group in queue.resource_groups
            for resource in group.covered_resources
        }

    def assign(self, workload: Workload) -> Assignment:
        usage: dict[FlavorResource, int] = {}
        contested: set[FlavorResource] = set()
        results: list[PodSetAssignment] = []
        self.taken = {}
        self.reads = []
        for pod_set in workload.pod_sets:
            result = self._assign_pod_set(workload, pod_set, usage, contested)
            results.append(result)
            if result.mode is Mode.NO_FIT:
                # Kueue stops at the first pod set that cannot be placed.
                break
        return Assignment(results, usage, contested)

    def _assign_pod_set(
        self,
        workload: Workload,
        pod_set: PodSet,
        usage: dict[FlavorResource, int],
        contested: set[FlavorResource],
    ) -> PodSetAssignment:
        result = PodSetAssignment(pod_set.name)
        requests = pod_set_requests(pod_set, self.queue)
        resolved: set[int] = set()
        order = request_order(requests)
        for resource in order:
            amount = requests[resource]
            group = self.group_of.get(resource)
            if group is None:
                if amount > 0:
                    return PodSetAssignment(
                        pod_set.name,
                        mode=Mode.NO_FIT,
                        reasons=[f"resource {resource} unavailable in ClusterQueue"],
                        attempts=[{"": "NoMatchingFlavor"}],
                    )
                continue
            if id(group) in resolved:
                continue
            resolved.add(id(group))
            wanted = {r: a for r, a in requests.items() if r in group.covered_resources}
            first_reason, first_check = len(result.reasons), len(result.checks)
            skipped_before = set(result.skipped_flavors)
            # A group covering every request (most queues have one) walks
            # them in the pod set's order, not worked out again.
            walk = order if len(wanted) == len(requests) else request_order(wanted)
            chosen = self._search(workload, pod_set, group, wanted, walk, usage, result)
            if chosen is None:
                # Only this group's reasons (and checks) explain the failure.
                return PodSetAssignment(
                    pod_set.name,
                    mode=Mode.NO_FIT,
                    reasons=result.reasons[first_reason:],
                    checks=result.checks[first_check:],
                    skipped_flavors={
                        f: why
                        for f, why in result.skipped_flavors.items()
                        if f not in skipped_before
                    },
                    attempts=result.attempts,
                )
            if chosen.mode is Mode.FIT:
                del result.reasons[first_reason:]
            if chosen.nodes:
                group_requests = {r: a for r, a in pod_set.requests.items() if r in wanted}
                add_pods(self.taken, group_requests, chosen.nodes)
            for resource_name, amount_needed in wanted.items():
                result.flavors[resource_name] = chosen.flavor
                fr = flavor_resource(chosen.flavor, resource_name)
                usage[fr] = usage.get(fr, 0) + amount_needed
                # Only the resources that themselves need preemption are contested.
                if chosen.resource_modes[resource_name] is not Mode.FIT:
                    contested.add(fr)
            result.mode = min(result.mode, chosen.mode)
            result.borrow = max(result.borrow, chosen.borrow)
        return result

    def _search(
        self,
        workload: Workload,
        pod_set: PodSet,
        group: ResourceGroup,
        wanted: dict[str, int],
        walk: tuple[str, ...],
        usage: dict[FlavorResource, int],
        result: PodSetAssignment,
    ) -> FlavorOutcome | None:
        """The group's best flavor for ``wanted``, its resources checked in
        ``walk``'s order (``request_order``); None if none fits."""
        best: FlavorOutcome | None = None
        preference = self.queue.flavor_fungibility.preference
        # Why each flavor of this group could not be used, for the NoFit reason.
        attempts: dict[str, str] = {}
        result.attempts.append(attempts)
        for flavor_quotas in group.flavors:
            flavor = self.policy.flavors.get(flavor_quotas.flavor)
            if flavor is None:
                result.reasons.append(f"flavor {flavor_quotas.flavor} not found")
                attempts[flavor_quotas.flavor] = "NoMatchingFlavor"
                continue
            problem = untolerated_taint(pod_set, flavor) or selector_mismatch(pod_set, flavor)
            if problem:
                result.reasons.append(problem)
                result.skipped_flavors[flavor.name] = problem
                attempts[flavor.name] = "NoMatchingFlavor"
                continue
            outcome = FlavorOutcome(flavor.name, Mode.FIT, 0, {})
            worst: tuple[Mode, int] | None = None
            first_check = len(result.checks)
            for resource in walk:
                fr = flavor_resource(flavor.name, resource)
                r_mode, r_borrow = self._fits_quota(
                    workload, fr, usage.get(fr, 0), wanted[resource], result
                )
                outcome.resource_modes[resource] = r_mode
                # The flavor is as good as its worst resource, (mode, borrowing
                # level) taken together the way flavors are compared.
                if worst is None or _preferred(worst, (r_mode, r_borrow), preference):
                    worst = (r_mode, r_borrow)
            if worst is not None:
                outcome.mode, outcome.borrow = worst
            misplaced = (
                self._misplaced(pod_set, flavor.name, outcome)
                if outcome.mode is not Mode.NO_FIT
                else None
            )
            if misplaced:
                result.reasons.append(misplaced)
                outcome.mode = Mode.NO_FIT
            if outcome.mode is Mode.NO_FIT:
                exceeds = any(c.requested > c.potential for c in result.checks[first_check:])
                attempts[flavor.name] = "ExceedsMaxQuota" if exceeds else "WaitingForQuota"
            if not _try_next(outcome.mode, outcome.borrow, self.queue):
                return outcome
            if _preferred(
                (outcome.mode, outcome.borrow),
                (best.mode, best.borrow) if best else None,
                preference,
            ):
                best = outcome
        if best is None or best.mode is Mode.NO_FIT:
            return None
        return best

    def _misplaced(self, pod_set: PodSet, flavor: str, outcome: FlavorOutcome) -> str | None:
        """On a topology-aware flavor, why the pods would find no place (None:
        they would). A head that needs preemption is checked as if the
        flavor's nodes were empty: its victims free room the search cannot see."""
        if self.placer is None or not self.placer.handles(flavor):
            return None
        placement = self.placer.place(
            flavor,
            pod_set.requests,
            pod_set.count,
            pod_set.topology_request,
            empty=outcome.mode is not Mode.FIT,
            also=self.taken,
        )
        if placement.placed:
            outcome.nodes = placement.nodes
            return None
        return self.placer.message(flavor, placement)

    def _fits_quota(
        self,
        workload: Workload,
        fr: FlavorResource,
        assumed: int,
        request: int,
        result: PodSetAssignment,
    ) -> tuple[Mode, int]:
        flavor, resource = fr
        value = assumed + request
        cell = self.node.cell(fr)
        potential = cell.potential
        available = max(0, cell.available())
        check = QuotaCheck(
            flavor,
            resource,
            value,
            available,
            potential,
            cell.nominal,
            cell.borrowing_limit(),
            Mode.FIT,
            0,
        )
        result.checks.append(check)
        if value > potential:
            result.reasons.append(
                f"insufficient quota for {resource} in flavor {flavor}, previously considered "
                f"podsets requests ({kubernetes_quantity(resource, assumed)}) + current podset "
                f"request ({kubernetes_quantity(resource, request)}) > maximum capacity "
                f"({kubernetes_quantity(resource, potential)})"
            )
            check.mode = Mode.NO_FIT
            self.reads.append(CellReading(fr, value, available, None, cell.steady_between(), cell))
            return Mode.NO_FIT, 0
        level = cell.borrowing_level(value)
        self.reads.append(CellReading(fr, value, available, level, cell.steady_between(), cell))
        borrow, may_reclaim = level
        if value <= available:
            check.borrow = borrow
            return Mode.FIT, borrow
        result.reasons.append(more_needed(flavor, resource, value - available))
        preemption = self.queue.preemption
        # By identity: an enum member's ``value`` is a Python-level property,
        # dearer than the rest of the check (a no-fit answer asks this).
        can_preempt_while_borrowing = (
            preemption.borrow_within_cohort is not BorrowWithinCohort.NEVER
            or (
                self.policy.fair_sharing
                and preemption.reclaim_within_cohort is not ReclaimWithinCohort.NEVER
            )
        )
        if cell.nominal >= value or may_reclaim or can_preempt_while_borrowing:
            mode, borrow = self.oracle(workload, fr, value)
            check.mode, check.borrow = mode, borrow
            return mode, borrow
        check.mode = Mode.NO_FIT
        return Mode.NO_FIT, 0
