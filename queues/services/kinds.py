"""The create / update / delete cycle every policy kind shares.

Each kind supplies how to validate a full spec, how to write it and what blocks
a delete; this module supplies the rest, the same way for every kind: the
policy write lock, the revision check (If-Match), merge of partial updates into
the current snapshot, validation of the whole result, and the history entry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from django.db import models

from queues.choices import ChangeAction, PolicyKind
from queues.errors import FieldError, PolicyConflict, raise_if
from queues.services.common import (
    blank_references_to_none,
    check_revision,
    merge,
    policy_write,
    record_change,
    unknown_field_errors,
    with_defaults,
)

M = TypeVar("M", bound=models.Model)


@dataclass(frozen=True)
class PolicyKindService(Generic[M]):
    kind: PolicyKind
    defaults: Mapping[str, Any]
    snapshot: Callable[[M], dict[str, Any]]
    # (full spec, the stored object or None on create) -> every broken rule
    validate: Callable[[dict[str, Any], M | None], list[FieldError]]
    # (valid spec, the stored object or None, actor) -> the saved object
    write: Callable[[dict[str, Any], M | None, Any], M]
    # what still uses the object, or None when it may go
    delete_blocker: Callable[[M], PolicyConflict | None]
    object_name: Callable[[M], str]
    # runs inside the same transaction after every successful write or delete
    after_change: Callable[[Any], None] | None = None
    # (full spec, the fields the caller sent, stored object or None) -> spec:
    # fills defaults that depend on other fields (a queue's class, a team's slug)
    complete: Callable[[dict[str, Any], Mapping[str, Any], M | None], dict[str, Any]] | None = None
    # (object, actor): removes what Berth generated for the object before it goes
    before_delete: Callable[[M, Any], None] | None = None
    # fields naming other objects; "" is normalised to None before validation
    references: tuple[str, ...] = ()

    def create(self, *, actor: Any, data: Mapping[str, Any]) -> M:
        with policy_write():
            spec = with_defaults(data, self.defaults)
            raise_if(unknown_field_errors(data, self.defaults))
            blank_references_to_none(spec, self.references)
            if self.complete is not None:
                spec = self.complete(spec, data, None)
            raise_if(self.validate(spec, None))
            obj = self.write(spec, None, actor)
            self._record(actor, obj, ChangeAction.CREATED, None, self.snapshot(obj))
            if self.after_change is not None:
                self.after_change(actor)
            return obj

    def update(
        self,
        *,
        actor: Any,
        obj: M,
        data: Mapping[str, Any],
        expected_revision: int | None = None,
        replace: bool = False,
    ) -> M:
        """Change ``obj``: with ``replace`` (PUT) ``data`` is the whole object and
        fields left out go back to their defaults; otherwise (PATCH) only the
        fields in ``data`` change."""
        with policy_write():
            obj.refresh_from_db()
            check_revision(obj, expected_revision)
            before = self.snapshot(obj)
            raise_if(unknown_field_errors(data, self.defaults))
            spec = with_defaults(data, self.defaults) if replace else merge(before, data)
            blank_references_to_none(spec, self.references)
            if self.complete is not None:
                spec = self.complete(spec, data, obj)
            raise_if(self.validate(spec, obj))
            if spec == before:
                return obj
            obj = self.write(spec, obj, actor)
            self._record(actor, obj, ChangeAction.UPDATED, before, self.snapshot(obj))
            if self.after_change is not None:
                self.after_change(actor)
            return obj

    def delete(self, *, actor: Any, obj: M, expected_revision: int | None = None) -> None:
        with policy_write():
            obj.refresh_from_db()
            check_revision(obj, expected_revision)
            blocker = self.delete_blocker(obj)
            if blocker is not None:
                raise blocker
            before = self.snapshot(obj)
            name = self.object_name(obj)
            if self.before_delete is not None:
                self.before_delete(obj, actor)
            obj.delete()
            self._record_named(actor, name, ChangeAction.DELETED, before, None)
            if self.after_change is not None:
                self.after_change(actor)

    def _record(
        self,
        actor: Any,
        obj: M,
        action: ChangeAction,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
    ) -> None:
        self._record_named(actor, self.object_name(obj), action, before, after)

    def _record_named(
        self,
        actor: Any,
        name: str,
        action: ChangeAction,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
    ) -> None:
        record_change(
            actor=actor,
            kind=self.kind,
            object_name=name,
            action=action,
            before=before,
            after=after,
        )


def save_fields(obj: M, spec: Mapping[str, Any], fields: list[str], *, is_new: bool) -> M:
    """Copy plain ``fields`` from ``spec`` onto ``obj`` and save, bumping its revision."""
    for field in fields:
        setattr(obj, field, spec[field])
    if not is_new:
        obj.revision += 1  # type: ignore[attr-defined]
    obj.save()
    return obj
