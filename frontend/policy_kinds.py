"""What the policy editor edits, kind by kind: the fields of topologies,
flavors, cohorts and cluster queues, their labels, choices and how each is shown."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import models
from django.http import Http404

from queues import selectors, services, snapshots
from queues.api import serializers
from queues.choices import (
    AdmissionMode,
    BorrowWithinCohortPolicy,
    CapacityType,
    FungibilityAction,
    FungibilityPreference,
    PolicyKind,
    QueueingStrategy,
    ReclaimWithinCohort,
    StopPolicy,
    WithinClusterQueue,
)
from queues.models import (
    ClusterQueue,
    Cohort,
    QueueClass,
    ResourceFlavor,
    Team,
    Topology,
    WorkloadPriorityClass,
)
from queues.rules import TAINT_EFFECTS
from queues.services.flavors import snapshot as flavor_snapshot
from queues.services.kinds import PolicyKindService
from queues.topology_rules import HOSTNAME, MAX_LEVELS

HISTORY_PAGE_SIZE = 20
OBJECT_HISTORY = 10
QUOTA_FIELDS = ("nominal_quota", "borrowing_limit", "lending_limit")
QUOTA_LABELS = {
    "nominal_quota": "Nominal",
    "borrowing_limit": "Borrowing limit",
    "lending_limit": "Lending limit",
}
# Bounds on what a posted form may describe (Kueue allows 16 groups of 64
# flavors); a little above, so the rules can still name what is too many.
MAX_GROUPS = 32
MAX_FLAVORS = 128

Options = list[tuple[str, str]]


# --------------------------------------------------------------------------- kinds


@dataclass(frozen=True)
class Field:
    """One editable field of a policy object, in the API's field names."""

    name: str
    label: str
    widget: str = "text"  # text | number | select | lines
    section: str = "General"
    # (the object being edited, or None) -> (value, label) pairs of a select
    options: Callable[[Any], Options] | None = None
    # An empty input means null (a reference, or "use the queue class's value").
    nullable: bool = False
    help: str = ""
    # (the stored object) -> why Kueue no longer lets it change, or "": the
    # edit form then shows the field read-only, with that reason.
    frozen: Callable[[Any], str] | None = None


@dataclass(frozen=True)
class Kind:
    slug: str  # in the editor's URLs
    label: str
    policy_kind: PolicyKind
    service: PolicyKindService[Any]
    serializer: type[serializers.PolicySerializer]
    model: type[models.Model]
    queryset: Callable[[], models.QuerySet[Any]]
    snapshot: Callable[[Any], dict[str, Any]]
    fields: tuple[Field, ...]
    quotas: bool = False
    quota_help: str = ""

    def get(self, name: str) -> Any:
        return self.queryset().filter(name=name).first()


def choices_of(
    choices: type[models.TextChoices], blank: str | None = None
) -> Callable[[Any], Options]:
    def options(_obj: Any) -> Options:
        found = [(str(value), str(label)) for value, label in choices.choices]
        if blank is not None and "" not in choices.values:
            found.insert(0, ("", blank))
        return found

    return options


def names_of(
    queryset: Callable[[], models.QuerySet[Any]], blank: str, *, field: str = "name"
) -> Callable[[Any], Options]:
    def options(obj: Any) -> Options:
        own = getattr(obj, "name", None) if isinstance(obj, Cohort) else None
        names = queryset().order_by(field).values_list(field, flat=True)
        return [("", blank)] + [(n, n) for n in names if n != own]

    return options


_TOPOLOGY_FROZEN = "Kueue fixes it once topology_name is set"


def _frozen_by_topology(flavor: Any) -> str:
    return _TOPOLOGY_FROZEN if getattr(flavor, "topology_name", "") else ""


_FROM_CLASS = "(from the queue class)"
_QUEUEING = "Queueing and preemption"
_FUNGIBILITY = "Flavor fungibility and stopping"

FLAVOR = Kind(
    slug="flavor",
    label="ResourceFlavor",
    policy_kind=PolicyKind.RESOURCE_FLAVOR,
    service=services.resource_flavors,
    serializer=serializers.ResourceFlavorSerializer,
    model=ResourceFlavor,
    queryset=selectors.resource_flavors,
    snapshot=flavor_snapshot,
    fields=(
        Field("description", "Description"),
        Field("capacity_type", "Capacity type", "select", options=choices_of(CapacityType)),
        Field(
            "gpu_hour_price",
            f"Price per GPU-hour ({settings.BERTH_CURRENCY})",
            nullable=True,
            help="what one GPU-hour on this flavor costs, for showback: a decimal with up to "
            "4 places, e.g. 2.49; empty: not priced. Each hour is charged at the price in "
            "force then",
        ),
        Field(
            "node_labels",
            "Node labels",
            "lines",
            help="one key=value per line",
            frozen=_frozen_by_topology,
        ),
        Field(
            "node_taints",
            "Node taints",
            "lines",
            help="one key=value:Effect (or key:Effect) per line; effects: "
            + ", ".join(TAINT_EFFECTS),
        ),
        Field(
            "topology_name",
            "Topology",
            "select",
            options=names_of(lambda: Topology.objects.all(), "(none: not topology-aware)"),
            help="places pods by the topology's levels (rack, block); Kueue then freezes "
            "the topology, node labels and tolerations",
            frozen=_frozen_by_topology,
        ),
    ),
)

TOPOLOGY = Kind(
    slug="topology",
    label="Topology",
    policy_kind=PolicyKind.TOPOLOGY,
    service=services.topologies,
    serializer=serializers.TopologySerializer,
    model=Topology,
    queryset=selectors.topologies,
    snapshot=snapshots.topology,
    fields=(
        Field("description", "Description"),
        Field(
            "levels",
            "Levels (node labels, widest first)",
            "lines",
            help=f"one node label key per line, e.g. topology.berth.dev/rack; 1 to {MAX_LEVELS}, "
            f"{HOSTNAME} only last",
            frozen=lambda _topology: (
                "Kueue fixes a topology's levels once it exists; "
                "create a new topology for other levels"
            ),
        ),
    ),
)

COHORT = Kind(
    slug="cohort",
    label="Cohort",
    policy_kind=PolicyKind.COHORT,
    service=services.cohorts,
    serializer=serializers.CohortSerializer,
    model=Cohort,
    queryset=selectors.cohorts,
    snapshot=snapshots.cohort,
    fields=(
        Field("description", "Description"),
        Field(
            "parent",
            "Parent cohort",
            "select",
            options=names_of(lambda: Cohort.objects.all(), "(none: a root of the tree)"),
            nullable=True,
        ),
        Field("fair_sharing_weight", "Fair-sharing weight", help="e.g. 1, 0.5 or 2"),
    ),
    quotas=True,
    quota_help="A cohort's own quota is shared by every queue in it (optional).",
)

CLUSTER_QUEUE = Kind(
    slug="cluster-queue",
    label="ClusterQueue",
    policy_kind=PolicyKind.CLUSTER_QUEUE,
    service=services.cluster_queues,
    serializer=serializers.ClusterQueueSerializer,
    model=ClusterQueue,
    queryset=selectors.cluster_queues,
    snapshot=snapshots.cluster_queue,
    fields=(
        Field("description", "Description"),
        Field(
            "team",
            "Team",
            "select",
            options=names_of(lambda: Team.objects.all(), "(shared by all teams)", field="slug"),
            nullable=True,
        ),
        Field(
            "cohort",
            "Cohort",
            "select",
            options=names_of(lambda: Cohort.objects.all(), "(none: neither lends nor borrows)"),
            nullable=True,
        ),
        Field(
            "queue_class",
            "Queue class",
            "select",
            options=names_of(lambda: QueueClass.objects.all(), "(none)"),
            nullable=True,
            help="supplies the queueing and preemption fields left to it",
        ),
        Field(
            "default_priority_class",
            "Default priority class",
            "select",
            options=names_of(lambda: WorkloadPriorityClass.objects.all(), "(none)"),
            nullable=True,
        ),
        Field("fair_sharing_weight", "Fair-sharing weight", help="e.g. 1, 0.5 or 2"),
        Field(
            "queueing_strategy",
            "Queueing strategy",
            "select",
            _QUEUEING,
            choices_of(QueueingStrategy, _FROM_CLASS),
            nullable=True,
        ),
        Field(
            "within_cluster_queue",
            "Preempt within the queue",
            "select",
            _QUEUEING,
            choices_of(WithinClusterQueue, _FROM_CLASS),
            nullable=True,
        ),
        Field(
            "reclaim_within_cohort",
            "Reclaim within the cohort",
            "select",
            _QUEUEING,
            choices_of(ReclaimWithinCohort, _FROM_CLASS),
            nullable=True,
        ),
        Field(
            "borrow_within_cohort_policy",
            "Preempt while borrowing",
            "select",
            _QUEUEING,
            choices_of(BorrowWithinCohortPolicy, _FROM_CLASS),
            nullable=True,
        ),
        Field(
            "borrow_within_cohort_max_priority_threshold",
            "Borrowing preemption: max priority",
            "number",
            _QUEUEING,
            nullable=True,
            help="empty: no threshold",
        ),
        Field(
            "admission_mode",
            "Admission fair sharing",
            "select",
            _QUEUEING,
            choices_of(AdmissionMode),
            help="UsageBasedAdmissionFairSharing lets the LocalQueues of this queue that "
            "used less lately go first; it needs admission fair sharing on in the Kueue "
            "configuration (until then Kueue takes it and orders as without it)",
        ),
        Field(
            "when_can_borrow",
            "When it can borrow",
            "select",
            _FUNGIBILITY,
            choices_of(FungibilityAction),
        ),
        Field(
            "when_can_preempt",
            "When it can preempt",
            "select",
            _FUNGIBILITY,
            choices_of(FungibilityAction),
        ),
        Field(
            "flavor_fungibility_preference",
            "Preference",
            "select",
            _FUNGIBILITY,
            choices_of(FungibilityPreference),
        ),
        Field("stop_policy", "Stop policy", "select", _FUNGIBILITY, choices_of(StopPolicy)),
    ),
    quotas=True,
    quota_help="Quantities in Kubernetes notation (64, 500m, 4Ti). Limits need a cohort; "
    "empty means no limit.",
)

KINDS = {kind.slug: kind for kind in (TOPOLOGY, FLAVOR, COHORT, CLUSTER_QUEUE)}
EDITOR_SLUG = {kind.policy_kind.value: kind.slug for kind in KINDS.values()}


def kind_named(slug: str) -> Kind:
    kind = KINDS.get(slug)
    if kind is None:
        raise Http404(f"no policy kind {slug!r} in the editor")
    return kind
