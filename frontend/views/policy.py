"""The policy editor, for platform admins: resource flavors, cohorts and
cluster queues with their quotas, edited in the browser.

Every edit goes through the same serializer and service as the API, so it
obeys the same rules and is recorded in the same history. **Plan** makes the
write inside a transaction that is always rolled back and shows the Kueue
objects that would change (``frontend.policy_plan``); **Apply** makes it for
real, against the revision the form was opened at, so a concurrent edit is
refused instead of overwritten. A committed policy change requests a
reconcile by itself (``queues.services.common.policy_write``).

The form sends only the fields the admin changed (a PATCH): a field left as
it was keeps following its queue class, exactly as through the API.

Anyone else gets a 404 (the editor's existence is nobody else's business),
and the refused attempt is logged.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import models
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect
from django.urls import reverse

from accounts.models import AccessDenial
from accounts.roles import is_platform_admin
from accounts.services import record_access_denial
from controlplane.api import flatten_errors
from frontend.policy_plan import FieldChange, PolicyPlan, dry_run, leaf_changes
from frontend.views.common import page, paginate
from queues import selectors, services, snapshots
from queues.api import serializers
from queues.choices import (
    BorrowWithinCohortPolicy,
    CapacityType,
    ChangeAction,
    FungibilityAction,
    FungibilityPreference,
    PolicyKind,
    QueueingStrategy,
    ReclaimWithinCohort,
    StopPolicy,
    WithinClusterQueue,
)
from queues.errors import FieldError, PolicyConflict, PolicyInvalid
from queues.models import (
    ClusterQueue,
    Cohort,
    PolicyChange,
    QueueClass,
    ResourceFlavor,
    Team,
    WorkloadPriorityClass,
)
from queues.reconcile import policy_version
from queues.rules import TAINT_EFFECTS
from queues.services import StaleRevision
from queues.services.kinds import PolicyKindService

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


def _choices(
    choices: type[models.TextChoices], blank: str | None = None
) -> Callable[[Any], Options]:
    def options(_obj: Any) -> Options:
        found = [(str(value), str(label)) for value, label in choices.choices]
        if blank is not None and "" not in choices.values:
            found.insert(0, ("", blank))
        return found

    return options


def _names(
    queryset: Callable[[], models.QuerySet[Any]], blank: str, *, field: str = "name"
) -> Callable[[Any], Options]:
    def options(obj: Any) -> Options:
        own = getattr(obj, "name", None) if isinstance(obj, Cohort) else None
        names = queryset().order_by(field).values_list(field, flat=True)
        return [("", blank)] + [(n, n) for n in names if n != own]

    return options


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
    snapshot=snapshots.resource_flavor,
    fields=(
        Field("description", "Description"),
        Field("capacity_type", "Capacity type", "select", options=_choices(CapacityType)),
        Field("node_labels", "Node labels", "lines", help="one key=value per line"),
        Field(
            "node_taints",
            "Node taints",
            "lines",
            help="one key=value:Effect (or key:Effect) per line; effects: "
            + ", ".join(TAINT_EFFECTS),
        ),
        Field(
            "topology_name",
            "Topology name",
            help="Kueue freezes the node labels and tolerations once this is set",
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
            options=_names(lambda: Cohort.objects.all(), "(none: a root of the tree)"),
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
            options=_names(lambda: Team.objects.all(), "(shared by all teams)", field="slug"),
            nullable=True,
        ),
        Field(
            "cohort",
            "Cohort",
            "select",
            options=_names(lambda: Cohort.objects.all(), "(none: neither lends nor borrows)"),
            nullable=True,
        ),
        Field(
            "queue_class",
            "Queue class",
            "select",
            options=_names(lambda: QueueClass.objects.all(), "(none)"),
            nullable=True,
            help="supplies the queueing and preemption fields left to it",
        ),
        Field(
            "default_priority_class",
            "Default priority class",
            "select",
            options=_names(lambda: WorkloadPriorityClass.objects.all(), "(none)"),
            nullable=True,
        ),
        Field("fair_sharing_weight", "Fair-sharing weight", help="e.g. 1, 0.5 or 2"),
        Field(
            "queueing_strategy",
            "Queueing strategy",
            "select",
            _QUEUEING,
            _choices(QueueingStrategy, _FROM_CLASS),
            nullable=True,
        ),
        Field(
            "within_cluster_queue",
            "Preempt within the queue",
            "select",
            _QUEUEING,
            _choices(WithinClusterQueue, _FROM_CLASS),
            nullable=True,
        ),
        Field(
            "reclaim_within_cohort",
            "Reclaim within the cohort",
            "select",
            _QUEUEING,
            _choices(ReclaimWithinCohort, _FROM_CLASS),
            nullable=True,
        ),
        Field(
            "borrow_within_cohort_policy",
            "Preempt while borrowing",
            "select",
            _QUEUEING,
            _choices(BorrowWithinCohortPolicy, _FROM_CLASS),
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
            "when_can_borrow",
            "When it can borrow",
            "select",
            _FUNGIBILITY,
            _choices(FungibilityAction),
        ),
        Field(
            "when_can_preempt",
            "When it can preempt",
            "select",
            _FUNGIBILITY,
            _choices(FungibilityAction),
        ),
        Field(
            "flavor_fungibility_preference",
            "Preference",
            "select",
            _FUNGIBILITY,
            _choices(FungibilityPreference),
        ),
        Field("stop_policy", "Stop policy", "select", _FUNGIBILITY, _choices(StopPolicy)),
    ),
    quotas=True,
    quota_help="Quantities in Kubernetes notation (64, 500m, 4Ti). Limits need a cohort; "
    "empty means no limit.",
)

KINDS = {kind.slug: kind for kind in (FLAVOR, COHORT, CLUSTER_QUEUE)}
EDITOR_SLUG = {kind.policy_kind.value: kind.slug for kind in KINDS.values()}


def _kind(slug: str) -> Kind:
    kind = KINDS.get(slug)
    if kind is None:
        raise Http404(f"no policy kind {slug!r} in the editor")
    return kind


# --------------------------------------------------------------------- the form
#
# A form's values are strings, as the inputs hold them; node labels and taints
# are lines of text; resource groups are lists of dicts of strings:
#   [{"covered": [resource, ...], "flavors": [{"name": flavor,
#     "resources": [{"nominal_quota": "8", "borrowing_limit": "", ...}]}]}]
# with one resources entry per covered resource, in order. Quota inputs are
# named rg-<group>-f-<flavor>-r-<resource>-<field>, so an error's field path
# (resource_groups[0].flavors[1].resources[0].lending_limit) names its input.


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _taint_line(taint: Mapping[str, Any]) -> str:
    value = taint.get("value") or ""
    key = f"{taint.get('key', '')}={value}" if value else str(taint.get("key", ""))
    return f"{key}:{taint.get('effect', '')}"


def parse_labels(text: str) -> tuple[dict[str, str], list[FieldError]]:
    labels: dict[str, str] = {}
    errors: list[FieldError] = []
    for number, line in enumerate(_lines(text), 1):
        key, sep, value = line.partition("=")
        if not sep:
            errors.append(
                FieldError("node_labels", "format", f"line {number}: {line!r} is not key=value")
            )
            continue
        key = key.strip()
        if key in labels:
            errors.append(
                FieldError("node_labels", "duplicate-key", f"line {number}: {key!r} is set twice")
            )
        labels[key] = value.strip()
    return labels, errors


def parse_taints(text: str) -> tuple[list[dict[str, str]], list[FieldError]]:
    taints: list[dict[str, str]] = []
    errors: list[FieldError] = []
    for number, line in enumerate(_lines(text), 1):
        head, sep, effect = line.rpartition(":")
        if not sep:
            errors.append(
                FieldError(
                    "node_taints",
                    "format",
                    f"line {number}: {line!r} is not key=value:Effect (or key:Effect)",
                )
            )
            continue
        key, _, value = head.partition("=")
        taint = {"key": key.strip(), "effect": effect.strip()}
        if value.strip():
            taint["value"] = value.strip()
        taints.append(taint)
    return taints, errors


_LINE_PARSERS: dict[str, Callable[[str], tuple[Any, list[FieldError]]]] = {
    "node_labels": parse_labels,
    "node_taints": parse_taints,
}


def _shown(field: Field, value: Any) -> str:
    if field.name == "node_labels":
        return "\n".join(f"{key}={val}" for key, val in (value or {}).items())
    if field.name == "node_taints":
        return "\n".join(_taint_line(taint) for taint in value or [])
    return "" if value is None else str(value)


def groups_from_snapshot(raw: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "covered": list(group["covered_resources"]),
            "flavors": [
                {
                    "name": flavor["name"],
                    "resources": [
                        {q: "" if quota.get(q) is None else str(quota[q]) for q in QUOTA_FIELDS}
                        for quota in flavor["resources"]
                    ],
                }
                for flavor in group["flavors"]
            ],
        }
        for group in raw
    ]


def groups_to_data(groups: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The API's ``resource_groups`` (empty limits left out: no limit)."""
    return [
        {
            "covered_resources": list(group["covered"]),
            "flavors": [
                {
                    "name": flavor["name"],
                    "resources": [
                        {
                            "name": group["covered"][r] if r < len(group["covered"]) else "",
                            "nominal_quota": quota["nominal_quota"],
                            **{
                                q: quota[q]
                                for q in ("borrowing_limit", "lending_limit")
                                if quota[q] != ""
                            },
                        }
                        for r, quota in enumerate(flavor["resources"])
                    ],
                }
                for flavor in group["flavors"]
            ],
        }
        for group in groups
    ]


def form_values(kind: Kind, snapshot: Mapping[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {"name": snapshot.get("name") or ""}
    for field in kind.fields:
        values[field.name] = _shown(field, snapshot.get(field.name))
    if kind.quotas:
        values["resource_groups"] = groups_from_snapshot(snapshot.get("resource_groups") or [])
    return values


def _count(post: QueryDict, key: str, limit: int) -> int:
    try:
        return max(0, min(int(post.get(key, "0")), limit))
    except ValueError:
        return 0


def _resources(text: str) -> list[str]:
    return [part for part in re.split(r"[\s,]+", text.strip()) if part]


def _blank_flavor(name: str, covered: list[str]) -> dict[str, Any]:
    return {"name": name, "resources": [dict.fromkeys(QUOTA_FIELDS, "") for _ in covered]}


def read_groups(post: QueryDict, action: str) -> tuple[list[dict[str, Any]], str]:
    """The quota table as posted, with flavors ticked "remove" left out (and a
    group left with none gone), and the row ``action`` adds; plus a note on
    what was added."""
    groups: list[dict[str, Any]] = []
    note = ""
    for g in range(_count(post, "rg", MAX_GROUPS)):
        covered = _resources(post.get(f"rg-{g}-covered", ""))
        flavors = []
        for f in range(_count(post, f"rg-{g}-flavors", MAX_FLAVORS)):
            prefix = f"rg-{g}-f-{f}"
            name = post.get(f"{prefix}-name", "").strip()
            if not name or post.get(f"{prefix}-remove"):
                continue
            flavors.append(
                {
                    "name": name,
                    "resources": [
                        {q: post.get(f"{prefix}-r-{r}-{q}", "").strip() for q in QUOTA_FIELDS}
                        for r in range(len(covered))
                    ],
                }
            )
        added = post.get(f"rg-{g}-add-flavor", "").strip()
        if action == f"add-flavor-{g}" and added:
            flavors.append(_blank_flavor(added, covered))
            note = f"Added flavor {added}: fill in its quotas, then Plan."
        if flavors:
            groups.append({"covered": covered, "flavors": flavors})
    if action == "add-group":
        covered = _resources(post.get("rg-new-covered", ""))
        name = post.get("rg-new-flavor", "").strip()
        if covered and name:
            groups.append({"covered": covered, "flavors": [_blank_flavor(name, covered)]})
            note = (
                f"Added a group for {', '.join(covered)} with flavor {name}: "
                "fill in its quotas, then Plan."
            )
        else:
            note = "To add a resource group, name its resources and pick a flavor."
    return groups, note


def read_form(
    kind: Kind, post: QueryDict, base: Mapping[str, Any], action: str
) -> tuple[dict[str, Any], str]:
    """The posted values over ``base`` (a field the form did not send keeps
    its value there)."""
    values = dict(base)
    if "name" in post:
        values["name"] = post.get("name", "").strip()
    for field in kind.fields:
        if field.name in post:
            raw = post.get(field.name, "")
            values[field.name] = "\n".join(_lines(raw)) if field.widget == "lines" else raw.strip()
    note = ""
    if kind.quotas and "rg" in post:
        values["resource_groups"], note = read_groups(post, action)
    return values, note


def _normal(field: Field, text: str) -> Any:
    parser = _LINE_PARSERS.get(field.name)
    if parser is None:
        return text.strip()
    parsed, errors = parser(text)
    return text if errors else parsed


def changes(
    kind: Kind, values: Mapping[str, Any], stored: Mapping[str, Any] | None
) -> tuple[dict[str, Any], list[FieldError]]:
    """What to send to the service: on an edit only the fields that differ from
    ``stored`` (what the form showed); on a create every field not left empty.
    Plus the errors of lines that do not parse."""
    data: dict[str, Any] = {}
    errors: list[FieldError] = []
    if stored is None:
        data["name"] = values.get("name", "")
    for field in kind.fields:
        raw = values.get(field.name, "")
        if stored is not None and _normal(field, raw) == _normal(field, stored[field.name]):
            continue
        parser = _LINE_PARSERS.get(field.name)
        if parser is not None:
            parsed, problems = parser(raw)
            errors += problems
        else:
            parsed = None if (raw == "" and field.nullable) else raw
        if stored is None and parsed in (None, "", {}, []):
            continue  # left empty: the default (or the queue class) decides
        data[field.name] = parsed
    if kind.quotas:
        groups = values.get("resource_groups", [])
        if stored is None:
            if groups:
                data["resource_groups"] = groups_to_data(groups)
        elif groups != stored["resource_groups"]:
            data["resource_groups"] = groups_to_data(groups)
    return data, errors


def validated(kind: Kind, data: dict[str, Any], obj: Any) -> dict[str, Any]:
    """``data`` through the API's serializer: the same types, choices and error
    paths as a request to ``/api/v1/``."""
    serializer = kind.serializer(obj, data=data, partial=obj is not None)
    if not serializer.is_valid():
        raise PolicyInvalid(flatten_errors(serializer.errors))
    return dict(serializer.validated_data)


_QUOTA_PATH = re.compile(
    r"^resource_groups\[(\d+)\](?:\.flavors\[(\d+)\](?:\.resources\[(\d+)\](?:\.(\w+))?)?)?"
)


def inputs_of(path: str) -> set[str]:
    """The form inputs an error's field path points at."""
    match = _QUOTA_PATH.match(path)
    if match:
        g, f, r, q = match.groups()
        if f is None:
            return {f"rg-{g}"}
        if r is not None and q in QUOTA_FIELDS:
            return {f"rg-{g}-f-{f}-r-{r}-{q}"}
        return {f"rg-{g}-f-{f}"}
    return {re.split(r"[.\[]", path, maxsplit=1)[0]}


def quota_table(groups: list[Mapping[str, Any]], invalid: set[str]) -> list[dict[str, Any]]:
    """The quota table as the template draws it: one row per flavor × resource."""
    table = []
    for g, group in enumerate(groups):
        flavors = []
        for f, flavor in enumerate(group["flavors"]):
            prefix = f"rg-{g}-f-{f}"
            rows = []
            for r, resource in enumerate(group["covered"]):
                quota = flavor["resources"][r] if r < len(flavor["resources"]) else {}
                inputs = []
                for q in QUOTA_FIELDS:
                    name = f"{prefix}-r-{r}-{q}"
                    inputs.append(
                        {
                            "name": name,
                            "value": quota.get(q, ""),
                            "label": f"{QUOTA_LABELS[q]} of {flavor['name']} {resource}",
                            "invalid": name in invalid,
                        }
                    )
                rows.append({"resource": resource, "inputs": inputs})
            flavors.append(
                {
                    "index": f,
                    "name": flavor["name"],
                    "prefix": prefix,
                    "rows": rows,
                    "span": max(1, len(rows)),
                    "invalid": prefix in invalid,
                }
            )
        table.append(
            {
                "index": g,
                "covered": ", ".join(group["covered"]),
                "flavors": flavors,
                "invalid": f"rg-{g}" in invalid,
            }
        )
    return table


def _sections(
    kind: Kind, values: Mapping[str, Any], invalid: set[str], obj: Any
) -> list[tuple[str, list[dict[str, Any]]]]:
    sections: dict[str, list[dict[str, Any]]] = {}
    for field in kind.fields:
        value = values.get(field.name, "")
        options = field.options(obj) if field.options else []
        if field.widget == "select" and value not in {v for v, _ in options}:
            options = [*options, (value, value)]  # keep what is stored, even if unknown
        sections.setdefault(field.section, []).append(
            {
                "name": field.name,
                "label": field.label,
                "widget": field.widget,
                "value": value,
                "options": options,
                "help": field.help,
                "invalid": field.name in invalid,
            }
        )
    return list(sections.items())


# ------------------------------------------------------------------ history


def describe(entry: PolicyChange) -> list[FieldChange]:
    """An entry's changes as field paths with before → after."""
    if entry.action == ChangeAction.UPDATED:
        return leaf_changes(entry.before or {}, entry.after or {})
    if entry.action == ChangeAction.CREATED:
        return [c for c in leaf_changes({}, entry.after or {}) if c.new not in (None, "", [], {})]
    return []


def _existing() -> dict[str, set[str]]:
    return {
        slug: set(kind.model._default_manager.values_list("name", flat=True))
        for slug, kind in KINDS.items()
    }


def history_rows(
    entries: list[PolicyChange], existing: dict[str, set[str]] | None = None
) -> list[dict[str, Any]]:
    existing = existing if existing is not None else _existing()
    rows = []
    for entry in entries:
        slug = EDITOR_SLUG.get(entry.kind)
        link = None
        if slug is not None and entry.object_name in existing.get(slug, set()):
            link = reverse("policy-edit", args=[slug, entry.object_name])
        rows.append({"entry": entry, "changes": describe(entry), "link": link})
    return rows


def _applied(request: HttpRequest, kind: Kind | None = None, name: str = "") -> Any:
    """The history entry an Apply just made (``?applied=<id>``), for the banner."""
    wanted = request.GET.get("applied", "")
    if not wanted.isdigit():
        return None
    entries = selectors.history_for(request.user).filter(pk=int(wanted))
    if kind is not None:
        entries = entries.filter(kind=kind.policy_kind, object_name=name)
    entry = entries.first()
    if entry is None:
        return None
    return {
        "rows": history_rows([entry]),
        "entry": entry,
        "reconcile_requested": settings.BERTH_RECONCILE_ON_CHANGE,
    }


# -------------------------------------------------------------------- views


def admin_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Signed-out visitors go to the login page; signed-in non-admins get a 404
    (and the attempt is logged), as for anything else that is not theirs."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not is_platform_admin(request.user):
            record_access_denial(
                request,
                reason=AccessDenial.Reason.FORBIDDEN,
                detail="the policy editor is for platform admins",
            )
            raise Http404("no such page")
        return view(request, *args, **kwargs)

    return login_required(wrapped)


def _quota_rows(snapshot: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        {"flavor": flavor["name"], **quota}
        for group in snapshot.get("resource_groups") or []
        for flavor in group["flavors"]
        for quota in flavor["resources"]
    ]


@admin_only
def policy_index(request: HttpRequest) -> HttpResponse:
    flavors = [
        {**snapshots.resource_flavor(f), "revision": f.revision}
        for f in selectors.resource_flavors().order_by("name")
    ]
    cohorts = [
        {**snapshots.cohort(c), "revision": c.revision, "quotas": None}
        for c in selectors.cohorts().order_by("name")
    ]
    for cohort in cohorts:
        cohort["quotas"] = _quota_rows(cohort)
    queues = []
    for queue in selectors.cluster_queues().order_by("name"):
        snapshot = snapshots.cluster_queue(queue)
        queues.append({**snapshot, "revision": queue.revision, "quotas": _quota_rows(snapshot)})
    history = paginate(request, selectors.history_for(request.user), HISTORY_PAGE_SIZE)
    context = {
        "flavors": flavors,
        "cohorts": cohorts,
        "queues": queues,
        "history": history,
        "history_rows": history_rows(list(history.object_list)),
        "applied": _applied(request),
        "capacity_types": _choices(CapacityType)(None),
        "cohort_options": _names(lambda: Cohort.objects.all(), "(none)")(None),
        "team_options": _names(lambda: Team.objects.all(), "(shared by all teams)", field="slug")(
            None
        ),
        "class_options": _names(lambda: QueueClass.objects.all(), "(none)")(None),
        "flavor_names": [f["name"] for f in flavors],
        "api_history": reverse("policy-change-list"),
    }
    return page(request, "frontend/policy.html", context, nav="policy", live=False)


@dataclass
class Editor:
    """What one editor page shows: the form, and what the last button did."""

    kind: Kind
    obj: Any  # None while creating
    values: dict[str, Any]
    revision: int | None
    plan: PolicyPlan | None = None
    errors: tuple[FieldError, ...] = ()
    stale: str = ""
    message: str = ""
    deleting: bool = False


def _render(request: HttpRequest, editor: Editor) -> HttpResponse:
    kind, obj = editor.kind, editor.obj
    invalid: set[str] = set()
    for error in editor.errors:
        invalid |= inputs_of(error.field)
    groups = editor.values.get("resource_groups", []) if kind.quotas else []
    used = {flavor["name"] for group in groups for flavor in group["flavors"]}
    name = obj.name if obj is not None else editor.values.get("name", "")
    history = []
    if obj is not None:
        entries = selectors.history_for(request.user).filter(
            kind=kind.policy_kind, object_name=obj.name
        )
        history = history_rows(list(entries[:OBJECT_HISTORY]))
    context = {
        "kind": kind,
        "obj": obj,
        "name": name,
        "creating": obj is None,
        "revision": editor.revision,
        "sections": _sections(kind, editor.values, invalid, obj),
        "quota_groups": quota_table(groups, invalid) if kind.quotas else None,
        "addable_flavors": sorted(
            set(ResourceFlavor.objects.values_list("name", flat=True)) - used
        ),
        "name_invalid": "name" in invalid,
        "plan": editor.plan,
        "errors": editor.errors,
        "stale": editor.stale,
        "message": editor.message,
        "deleting": editor.deleting,
        "history": history,
        "applied": _applied(request, kind, name) if obj is not None else None,
        "tolerations": (
            "\n".join(str(t) for t in obj.tolerations) if isinstance(obj, ResourceFlavor) else ""
        ),
        "form_url": (
            reverse("policy-edit", args=[kind.slug, obj.name])
            if obj is not None
            else reverse("policy-new", args=[kind.slug])
        ),
    }
    # A refused edit is the form again, with its errors: 200, as on the team page.
    return page(request, "frontend/policy_edit.html", context, nav="policy", live=False)


def _refused(editor: Editor, exc: Exception) -> Editor:
    """The editor showing why the service said no (nothing was saved)."""
    if isinstance(exc, StaleRevision):
        editor.stale = exc.message
        editor.errors = (FieldError("revision", exc.rule, exc.message),)
    elif isinstance(exc, PolicyConflict):
        listed = "; ".join(f"{k}: {', '.join(v)}" for k, v in exc.references.items())
        message = exc.message + (f" ({listed})" if listed and listed not in exc.message else "")
        editor.errors = (FieldError("name", exc.rule, message),)
    elif isinstance(exc, PolicyInvalid):
        editor.errors = tuple(exc.errors)
    else:  # pragma: no cover - only the three above are caught
        raise exc
    return editor


def _revision(post: QueryDict) -> int | None:
    raw = post.get("revision", "")
    if not raw.strip().isdigit():
        raise PolicyInvalid.single(
            "revision", "format", "the form lost the revision it was opened at; reload the page"
        )
    return int(raw)


def _new_entry(kind: Kind, name: str, after: int) -> PolicyChange | None:
    return (
        PolicyChange.objects.filter(pk__gt=after, kind=kind.policy_kind, object_name=name)
        .order_by("pk")
        .first()
    )


@admin_only
def policy_edit(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    spec = _kind(kind)
    obj = spec.get(name)
    if obj is None:
        raise Http404(f"no {spec.label} {name}")
    stored = form_values(spec, spec.snapshot(obj))
    editor = Editor(spec, obj, stored, obj.revision)
    if request.method != "POST":
        return _render(request, editor)
    post = request.POST
    action = post.get("action", "plan")
    try:
        editor.revision = _revision(post)
    except PolicyInvalid as exc:
        return _render(request, _refused(editor, exc))
    revision = editor.revision
    # Writes get their own copy of the object: a Plan's write changes it in
    # memory, and the rollback does not undo that.
    fresh = spec.model._default_manager.get(pk=obj.pk)

    if action in ("plan-delete", "delete"):
        editor.deleting = True

        def delete() -> None:
            spec.service.delete(actor=request.user, obj=fresh, expected_revision=revision)

        try:
            if action == "plan-delete":
                editor.plan = dry_run(delete)
                return _render(request, editor)
            mark = policy_version()
            delete()
        except PolicyConflict as exc:
            return _render(request, _refused(editor, exc))
        entry = _new_entry(spec, name, mark)
        return redirect(f"{reverse('policy')}?applied={entry.pk if entry else ''}")

    editor.values, editor.message = read_form(spec, post, stored, action)
    if action not in ("plan", "apply"):
        return _render(request, editor)  # a row added to the form: nothing written
    try:
        data, problems = changes(spec, editor.values, stored)
        if problems:
            raise PolicyInvalid(problems)
        data = validated(spec, data, obj)

        def update() -> None:
            spec.service.update(
                actor=request.user, obj=fresh, data=data, expected_revision=revision
            )

        if action == "plan":
            editor.plan = dry_run(update)
            return _render(request, editor)
        mark = policy_version()
        update()
    except (PolicyInvalid, PolicyConflict) as exc:
        return _render(request, _refused(editor, exc))
    entry = _new_entry(spec, name, mark)
    if entry is None:
        obj = spec.get(name)
        editor = Editor(spec, obj, form_values(spec, spec.snapshot(obj)), obj.revision)
        editor.message = "Nothing to apply: the form says what the policy already says."
        return _render(request, editor)
    return redirect(f"{reverse('policy-edit', args=[spec.slug, name])}?applied={entry.pk}")


@admin_only
def policy_new(request: HttpRequest, kind: str) -> HttpResponse:
    spec = _kind(kind)
    blank = form_values(spec, {**spec.service.defaults, "name": ""})
    editor = Editor(spec, None, blank, None)
    if request.method != "POST":
        return _render(request, editor)
    action = request.POST.get("action", "plan")
    editor.values, editor.message = read_form(spec, request.POST, blank, action)
    if action not in ("plan", "apply"):
        return _render(request, editor)
    try:
        data, problems = changes(spec, editor.values, None)
        if problems:
            raise PolicyInvalid(problems)
        data = validated(spec, data, None)

        def create() -> None:
            spec.service.create(actor=request.user, data=data)

        if action == "plan":
            editor.plan = dry_run(create)
            return _render(request, editor)
        mark = policy_version()
        create()
    except (PolicyInvalid, PolicyConflict) as exc:
        return _render(request, _refused(editor, exc))
    name = data["name"]
    entry = _new_entry(spec, name, mark)
    applied = f"?applied={entry.pk}" if entry else ""
    return redirect(reverse("policy-edit", args=[spec.slug, name]) + applied)
