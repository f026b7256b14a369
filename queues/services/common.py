"""Shared machinery of the policy services: one write lock, history, references."""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from django.db import connection, models, transaction

from queues import rules
from queues.choices import ChangeAction
from queues.deferred import send
from queues.errors import FieldError, PolicyConflict
from queues.models import PolicyChange

# One advisory lock serialises policy writes across processes: policy edits are
# rare, and whole-tree invariants (no cohort cycle, generated LocalQueues in step
# with teams and queues) then hold without reasoning about interleavings.
POLICY_LOCK_KEY = zlib.crc32(b"berth.policy.write")
log = logging.getLogger(__name__)

M = TypeVar("M", bound=models.Model)


class StaleRevision(PolicyConflict):
    """The client edited an older revision than the one stored (If-Match failed)."""


@contextmanager
def policy_write() -> Iterator[None]:
    """A transaction holding the policy write lock (PostgreSQL advisory lock;
    SQLite already allows one writer at a time). Once it commits, a reconcile
    is requested so the cluster follows the policy."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [POLICY_LOCK_KEY])
        yield
        # One reconcile per outermost commit, however many writes it holds.
        if not any(entry[1] is _request_reconcile for entry in connection.run_on_commit):
            transaction.on_commit(_request_reconcile)


def _request_reconcile() -> None:
    """The change is committed whatever happens here: a reconcile that cannot
    be queued or started (broker down, cluster misconfigured) is logged, and
    the periodic reconcile and the sweeper catch up."""
    from django.conf import settings

    if not settings.BERTH_RECONCILE_ON_CHANGE:
        return
    send("queues.tasks.reconcile_policy", "policy-change", stored="policy stored")


_NOTE: ContextVar[str] = ContextVar("berth_policy_change_note", default="")


@contextmanager
def noted(note: str) -> Iterator[None]:
    """Every history entry recorded inside carries ``note`` (where the changes
    came from), without each service taking it as an argument."""
    token = _NOTE.set(note[:500])
    try:
        yield
    finally:
        _NOTE.reset(token)


def record_change(
    *,
    actor: Any,
    kind: str,
    object_name: str,
    action: ChangeAction,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
    team_slug: str = "",
) -> PolicyChange | None:
    """Append one history entry; an update that changed nothing records nothing."""
    if action == ChangeAction.UPDATED and before == after:
        return None
    user = actor if getattr(actor, "is_authenticated", False) else None
    return PolicyChange.objects.create(
        actor=user,
        actor_username=user.get_username() if user else "system",
        kind=kind,
        object_name=object_name,
        action=action,
        team_slug=team_slug,
        before=dict(before) if before is not None else None,
        after=dict(after) if after is not None else None,
        note=_NOTE.get(),
    )


def check_revision(obj: Any, expected: int | None) -> None:
    if expected is not None and expected != obj.revision:
        raise StaleRevision(
            f"{obj} is at revision {obj.revision}, but the change was made to revision "
            f"{expected}; reload it and apply your change again",
            "stale-revision",
        )


def bump_revision(obj: Any) -> None:
    obj.revision = obj.revision + 1


def merge(current: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(current)
    merged.update(changes)
    return merged


def unknown_field_errors(data: Mapping[str, Any], known: Mapping[str, Any]) -> list[FieldError]:
    return [
        FieldError(
            key,
            "unknown-field",
            f"is not a field of this object; known fields: {', '.join(sorted(known))}",
        )
        for key in data
        if key not in known
    ]


def choice_errors(field: str, value: Any, choices: type[models.TextChoices]) -> list[FieldError]:
    if value in choices.values:
        return []
    allowed = ", ".join(repr(v) if v == "" else v for v in choices.values)
    return [
        FieldError(field, "unsupported-value", f"{value!r} is not supported: use one of {allowed}")
    ]


def resolve(
    model: type[M], field: str, value: Any, errors: list[FieldError], *, lookup: str = "name"
) -> M | None:
    """The object ``value`` names, or None (with an error if a name was given)."""
    if value in (None, ""):
        return None
    found = model._default_manager.filter(**{lookup: value}).first()
    if found is None:
        label = model._meta.verbose_name
        errors.append(
            FieldError(field, "unknown-reference", f"there is no {label} named {value!r}")
        )
    return found


def object_name_errors(
    spec: Mapping[str, Any], existing: Any, noun: str, *, kind: str = "subdomain"
) -> list[FieldError]:
    """A Kubernetes object's ``name``: given, well-formed (``kind`` as in
    ``rules.name_errors``), and unchanged once the object exists."""
    errors = required_errors(spec, ["name"])
    if errors:
        return errors
    errors = rules.name_errors("name", spec["name"], kind=kind)
    if existing is not None:
        errors += immutable_errors(
            "name",
            existing.name,
            spec["name"],
            f"Kubernetes object names are fixed; create a new {noun} instead",
        )
    return errors


def immutable_errors(field: str, old: Any, new: Any, why: str) -> list[FieldError]:
    if old == new:
        return []
    return [FieldError(field, "immutable", f"cannot change from {old!r} to {new!r}: {why}")]


_REFERENCE_LABELS = {
    "cluster_queues": "cluster queue",
    "cohorts": "cohort",
    "local_queues": "local queue",
    "queue_classes": "queue class",
    "resource_flavors": "resource flavor",
}


def in_use(
    subject: str, references: Mapping[str, Iterable[str]], advice: str
) -> PolicyConflict | None:
    """A 409 listing what still uses ``subject``, or None when nothing does.

    ``references`` maps a kind (``cluster_queues``, ``cohorts``, ``local_queues``,
    ``queue_classes``, ``resource_flavors``) to the names that refer to the subject."""
    found = {kind: sorted(names) for kind, names in references.items()}
    found = {kind: names for kind, names in found.items() if names}
    if not found:
        return None
    listed = ", ".join(
        f"{_REFERENCE_LABELS[kind]} {name}" for kind, names in found.items() for name in names
    )
    return PolicyConflict(f"{subject} is still used by {listed}; {advice}", "in-use", found)


def with_defaults(data: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with every missing field set to a fresh copy of its default."""
    spec = {key: _fresh(value) for key, value in defaults.items()}
    spec.update(data)
    return spec


def blank_references_to_none(spec: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """An empty string names nothing: treat it exactly like null, so that rules
    such as "limits need a cohort" see the same value that gets stored."""
    for field in fields:
        if spec.get(field) == "":
            spec[field] = None
    return spec


def _fresh(value: Any) -> Any:
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return list(value)
    return value


def required_errors(spec: Mapping[str, Any], fields: list[str]) -> list[FieldError]:
    return [
        FieldError(field, "required", "is required")
        for field in fields
        if spec.get(field) in (None, "")
    ]
