"""Who may see and do what, in one place for the API and the pages.

Roles come from ``accounts.roles`` (platform admin, global approver) and team
memberships from here. The rules:

- every signed-in user reads the policy; only platform admins change it, run
  what-ifs, read the access log and see every team;
- a team member sees their teams' private parts (members, jobs, workloads,
  approvals of their jobs) and submits to their teams;
- approval requests add the approvers' rule (``approvals.access``, built on
  these teams).

Another team's object answers 404, as if it did not exist; a page or action
for admins answers 403 under the API and 404 on the pages. Every refusal goes
through ``refuse`` (pages) or the API's exception handler, both of which record
it in the access log (``accounts.services.record_access_denial``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db.models import Model, QuerySet
from django.http import Http404, HttpRequest

from accounts.models import AccessDenial
from accounts.roles import is_global_approver, is_platform_admin
from accounts.services import record_access_denial
from queues.choices import TeamRole
from queues.models import TeamMembership, TeamNamespace

__all__ = [
    "WorkloadView",
    "is_global_approver",
    "is_platform_admin",
    "may_change_policy",
    "may_see_team",
    "other_teams_masked",
    "refuse",
    "team_ids_of",
    "visible_team_ids",
    "visible_to",
    "workload_views",
]


def may_change_policy(user: Any) -> bool:
    """Policy writes, what-if runs, the access log: platform admins."""
    return is_platform_admin(user)


def team_ids_of(user: Any, *, roles: tuple[str, ...] = tuple(TeamRole.values)) -> set[int]:
    """The teams in which ``user`` holds one of ``roles``."""
    if not getattr(user, "is_authenticated", False):
        return set()
    memberships = TeamMembership.objects.filter(user=user, role__in=roles)
    # No ordering: the model's default one joins the team and user tables for nothing.
    return set(memberships.order_by().values_list("team_id", flat=True))


def visible_team_ids(user: Any) -> set[int] | None:
    """The teams whose private parts ``user`` sees: None means every team (an admin)."""
    return None if is_platform_admin(user) else team_ids_of(user)


def may_see_team(user: Any, team_id: int | None) -> bool:
    visible = visible_team_ids(user)
    return visible is None or (team_id is not None and team_id in visible)


@dataclass(frozen=True)
class WorkloadView:
    """How a workload in a shared line reads to one viewer: in full (its name,
    job and why it waits) when it runs in a namespace of the viewer's teams,
    else only as a workload of its team — its place, size, priority and
    estimated start, which explain the viewer's own wait, but not its name,
    job or messages (which name it)."""

    full: bool
    team: str  # the owning team's slug, or "" for a namespace no team owns


def workload_views(user: Any, namespaces: Iterable[str]) -> dict[str, WorkloadView]:
    """For each namespace, how its workloads read to ``user``."""
    names = set(namespaces)
    owners = {
        name: (team_id, slug)
        for name, team_id, slug in TeamNamespace.objects.filter(name__in=names).values_list(
            "name", "team_id", "team__slug"
        )
    }
    visible = visible_team_ids(user)
    views = {}
    for name in names:
        team_id, slug = owners.get(name, (None, ""))
        views[name] = WorkloadView(full=visible is None or team_id in visible, team=slug)
    return views


def other_teams_masked(user: Any, answer: Any, namespaces: Iterable[str]) -> Any:
    """``answer`` (JSON-like) with every ``namespace/name`` of a workload in
    one of ``namespaces`` the user may not see in full replaced by "a workload
    of team X": an explanation names what holds the quota or stands ahead,
    and another team's work reads as it does on the queue pages."""
    views = workload_views(user, namespaces)
    hidden = {name: view for name, view in views.items() if not view.full}
    if not hidden:
        return answer
    pattern = re.compile(
        r"\b("
        + "|".join(re.escape(name) for name in sorted(hidden))
        + r")/[a-z0-9]([-a-z0-9.]*[a-z0-9])?"
    )

    def masked(match: re.Match[str]) -> str:
        team = hidden[match.group(1)].team
        return f"a workload of team {team}" if team else "another team's workload"

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return pattern.sub(masked, value)
        if isinstance(value, dict):
            return {key: walk(item) for key, item in value.items()}
        if isinstance(value, list):
            return [walk(item) for item in value]
        return value

    return walk(answer)


M = TypeVar("M", bound=Model)


def visible_to(user: Any, objects: QuerySet[M], team: str = "team_id") -> QuerySet[M]:
    """``objects`` (of a model with a team) that ``user`` may see."""
    visible = visible_team_ids(user)
    return objects if visible is None else objects.filter(**{f"{team}__in": visible})


def refuse(
    request: HttpRequest,
    detail: str,
    *,
    reason: str = AccessDenial.Reason.FORBIDDEN,
    message: str = "no such page",
) -> Http404:
    """Record a refused attempt (``detail`` says what was refused) and return
    the 404 to raise: what is not the user's to see does not exist for them."""
    record_access_denial(request, reason=reason, detail=detail)
    return Http404(message)
