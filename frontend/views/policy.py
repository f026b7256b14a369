"""The policy editor, for platform admins: topologies, resource flavors,
cohorts and cluster queues with their quotas, edited in the browser.

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

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect
from django.urls import reverse

from frontend.kueue_config_form import summary as kueue_summary
from frontend.policy_forms import (
    changes,
    form_sections,
    form_values,
    inputs_of,
    quota_table,
    read_form,
    validated,
)
from frontend.policy_kinds import (
    EDITOR_SLUG,
    HISTORY_PAGE_SIZE,
    KINDS,
    OBJECT_HISTORY,
    Kind,
    choices_of,
    kind_named,
    names_of,
)
from frontend.policy_plan import FieldChange, PolicyPlan, dry_run, leaf_changes
from frontend.views.common import page, paginate
from queues import selectors, snapshots
from queues.access import may_change_policy, refuse
from queues.choices import (
    CapacityType,
    ChangeAction,
    PolicyKind,
)
from queues.errors import FieldError, PolicyConflict, PolicyInvalid
from queues.models import (
    Cohort,
    PolicyChange,
    QueueClass,
    ResourceFlavor,
    Team,
    Topology,
)
from queues.reconcile import policy_version
from queues.services import StaleRevision

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
        elif entry.kind == PolicyKind.KUEUE_CONFIGURATION:
            link = reverse("kueue-configuration-editor")
        rows.append({"entry": entry, "changes": describe(entry), "link": link})
    return rows


def applied_banner(request: HttpRequest, policy_kind: str | None = None, name: str = "") -> Any:
    """The history entry an Apply just made (``?applied=<id>``), for the banner."""
    wanted = request.GET.get("applied", "")
    if not wanted.isdigit():
        return None
    entries = selectors.history_for(request.user).filter(pk=int(wanted))
    if policy_kind is not None:
        entries = entries.filter(kind=policy_kind, object_name=name)
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
        if not may_change_policy(request.user):
            raise refuse(request, "the policy editor is for platform admins")
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
    topologies = [
        {
            **snapshots.topology(t),
            "revision": t.revision,
            "flavors": [f["name"] for f in flavors if f["topology_name"] == t.name],
        }
        for t in selectors.topologies().order_by("name")
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
    configuration = selectors.kueue_configuration()
    context = {
        "kueue_summary": kueue_summary(snapshots.kueue_configuration(configuration)),
        "kueue_saved": configuration.is_saved,
        "kueue_revision": configuration.revision,
        "topologies": topologies,
        "topology_options": names_of(lambda: Topology.objects.all(), "(none: not topology-aware)")(
            None
        ),
        "flavors": flavors,
        "cohorts": cohorts,
        "queues": queues,
        "history": history,
        "history_rows": history_rows(list(history.object_list)),
        "applied": applied_banner(request),
        "capacity_types": choices_of(CapacityType)(None),
        "cohort_options": names_of(lambda: Cohort.objects.all(), "(none)")(None),
        "team_options": names_of(lambda: Team.objects.all(), "(shared by all teams)", field="slug")(
            None
        ),
        "class_options": names_of(lambda: QueueClass.objects.all(), "(none)")(None),
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
        "sections": form_sections(kind, editor.values, invalid, obj),
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
        "applied": applied_banner(request, kind.policy_kind, name) if obj is not None else None,
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


def posted_revision(post: QueryDict) -> int:
    """The revision the form was opened at (its hidden input)."""
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
    spec = kind_named(kind)
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
        editor.revision = posted_revision(post)
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
    spec = kind_named(kind)
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
