"""Writes for teams, their namespaces and their members."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib.auth import get_user_model

from queues import rules, snapshots
from queues.choices import ChangeAction, PolicyKind, TeamRole
from queues.errors import FieldError, PolicyConflict, PolicyInvalid
from queues.models import LocalQueue, Team, TeamMembership, TeamNamespace
from queues.services.common import (
    choice_errors,
    immutable_errors,
    in_use,
    policy_write,
    record_change,
    required_errors,
)
from queues.services.kinds import PolicyKindService, save_fields
from queues.services.local_queues import remove_generated_local_queues, sync_generated_local_queues

# Namespaces that belong to the cluster or to Kueue, never to a team.
RESERVED_NAMESPACES = frozenset(
    {"default", "kube-system", "kube-public", "kube-node-lease", "kueue-system"}
)

DEFAULTS: dict[str, Any] = {"slug": None, "name": None, "description": "", "namespaces": None}


def _complete(
    spec: dict[str, Any], changes: Mapping[str, Any], existing: Team | None
) -> dict[str, Any]:
    if spec.get("namespaces") is None and spec.get("slug"):
        spec["namespaces"] = [spec["slug"]]
    return spec


def _validate(spec: dict[str, Any], existing: Team | None) -> list[FieldError]:
    errors = required_errors(spec, ["slug", "name"])
    if errors:
        return errors
    errors += rules.name_errors("slug", spec["slug"], kind="label")
    if existing is not None:
        errors += immutable_errors(
            "slug", existing.slug, spec["slug"], "namespaces, labels and history refer to it"
        )
    elif Team.objects.filter(slug=spec["slug"]).exists():
        errors.append(FieldError("slug", "unique", f"a team with slug {spec['slug']!r} exists"))
    namespaces = spec["namespaces"]
    if not isinstance(namespaces, list) or not namespaces:
        return [*errors, FieldError("namespaces", "min-namespaces", "must list at least one")]
    seen: set[str] = set()
    for i, namespace in enumerate(namespaces):
        field = f"namespaces[{i}]"
        name_problems = rules.name_errors(field, namespace, kind="label")
        errors += name_problems
        if name_problems:
            continue
        if namespace in seen:
            errors.append(FieldError(field, "duplicate", f"{namespace!r} is listed twice"))
        seen.add(namespace)
        if namespace in RESERVED_NAMESPACES:
            errors.append(
                FieldError(
                    field,
                    "reserved-namespace",
                    f"{namespace!r} belongs to the cluster, not to a team",
                )
            )
        owner = TeamNamespace.objects.filter(name=namespace).exclude(team=existing).first()
        if owner is not None and (existing is None or owner.team_id != existing.pk):
            errors.append(
                FieldError(
                    field,
                    "namespace-taken",
                    f"{namespace!r} already belongs to team {owner.team.slug!r}",
                )
            )
    if existing is not None:
        dropped = existing.namespaces.exclude(name__in=seen)
        manual = sorted(
            str(lq) for lq in LocalQueue.objects.filter(namespace__in=dropped, generated=False)
        )
        if manual:
            errors.append(
                FieldError(
                    "namespaces",
                    "namespace-in-use",
                    f"removing a namespace would orphan local queue(s) "
                    f"{', '.join(manual)}; delete them first",
                )
            )
    return errors


def _write(spec: dict[str, Any], existing: Team | None, actor: Any) -> Team:
    team = save_fields(
        existing or Team(), spec, ["slug", "name", "description"], is_new=existing is None
    )
    wanted = set(spec["namespaces"])
    dropped = team.namespaces.exclude(name__in=wanted)
    remove_generated_local_queues(actor, LocalQueue.objects.filter(namespace__in=dropped))
    dropped.delete()
    have = set(team.namespaces.values_list("name", flat=True))
    TeamNamespace.objects.bulk_create(
        TeamNamespace(team=team, name=name) for name in sorted(wanted - have)
    )
    return team


def _delete_blocker(team: Team) -> PolicyConflict | None:
    manual = LocalQueue.objects.filter(namespace__team=team, generated=False)
    return in_use(
        f"team {team.slug!r}",
        {
            "cluster_queues": team.cluster_queues.values_list("name", flat=True),
            "local_queues": (str(lq) for lq in manual),
        },
        "delete them or hand them to another team first",
    )


def _before_delete(team: Team, actor: Any) -> None:
    remove_generated_local_queues(actor, LocalQueue.objects.filter(namespace__team=team))
    members = snapshots.team_members(team)
    if members["members"] or members["approvers"]:
        record_change(
            actor=actor,
            kind=PolicyKind.TEAM_MEMBERSHIP,
            object_name=team.slug,
            action=ChangeAction.DELETED,
            before=members,
            after=None,
            team_slug=team.slug,
        )


teams: PolicyKindService[Team] = PolicyKindService(
    kind=PolicyKind.TEAM,
    defaults=DEFAULTS,
    snapshot=snapshots.team,
    validate=_validate,
    write=_write,
    delete_blocker=_delete_blocker,
    object_name=lambda team: team.slug,
    complete=_complete,
    after_change=sync_generated_local_queues,
    before_delete=_before_delete,
)


def set_membership(*, actor: Any, team: Team, username: str, role: str, present: bool) -> bool:
    """Add (``present=True``) or remove a user's role in a team. Idempotent:
    returns whether anything changed."""
    errors = choice_errors("role", role, TeamRole)
    user = get_user_model()._default_manager.filter(username=username).first()
    if user is None:
        errors.append(FieldError("username", "unknown-user", f"there is no user {username!r}"))
    if errors:
        raise PolicyInvalid(errors)
    with policy_write():
        before = snapshots.team_members(team)
        if present:
            _, changed = TeamMembership.objects.get_or_create(team=team, user=user, role=role)
        else:
            changed = bool(
                TeamMembership.objects.filter(team=team, user=user, role=role).delete()[0]
            )
        if changed:
            record_change(
                actor=actor,
                kind=PolicyKind.TEAM_MEMBERSHIP,
                object_name=team.slug,
                action=ChangeAction.UPDATED,
                before=before,
                after=snapshots.team_members(team),
                team_slug=team.slug,
            )
        return changed
