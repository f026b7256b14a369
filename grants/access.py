"""Who may ask for, see, decide and end quota grants.

A grant takes capacity from other teams (their share of the cohort, or a
lender's nominal quota), so it is decided by someone who answers for the whole
cluster: a platform admin or a global approver (group ``approvers``), never the
person who asked. A team's own approvers decide its urgent-release jobs, not
its extra quota. Any member of the queue's team may ask; the team and the
lender's team see the grant; the requesting team or a decider may end it early.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from accounts.roles import is_global_approver, is_platform_admin
from grants.models import QuotaGrant
from queues.models import ClusterQueue, Team, TeamMembership


class NotAllowed(Exception):
    """The user may not do this to the grant; ``rule`` is stable for clients."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule
        self.message = message


def is_decider(user: Any) -> bool:
    return is_platform_admin(user) or is_global_approver(user)


def _team_ids(user: Any) -> QuerySet[TeamMembership, Any]:
    return TeamMembership.objects.filter(user=user).values("team_id")


def visible_to(user: Any) -> QuerySet[QuotaGrant]:
    """Grants ``user`` may see: all for deciders; else their teams', those
    lending from their teams' queues, and their own."""
    if not getattr(user, "is_authenticated", False):
        return QuotaGrant.objects.none()
    if is_decider(user):
        return QuotaGrant.objects.all()
    lenders = ClusterQueue.objects.filter(team_id__in=_team_ids(user)).values("name")
    return QuotaGrant.objects.filter(
        Q(team_id__in=_team_ids(user)) | Q(lender__in=lenders) | Q(requester=user)
    )


def check_may_request(user: Any, team: Team) -> None:
    """A member (any role) of the team that owns the queue, or a platform admin."""
    if is_platform_admin(user):
        return
    if not TeamMembership.objects.filter(user=user, team=team).exists():
        raise NotAllowed(
            "not-a-member",
            f"only a member of team {team.slug} or a platform admin can ask for quota "
            "for its queues",
        )


def check_may_decide(user: Any, grant: QuotaGrant) -> None:
    if grant.requester_id is not None and grant.requester_id == getattr(user, "pk", None):
        raise NotAllowed(
            "requester-cannot-decide",
            "you asked for this grant: another approver has to decide it",
        )
    if not is_decider(user):
        raise NotAllowed(
            "not-an-approver",
            "only a platform admin or a global approver can decide quota grants: "
            "a grant takes capacity from other teams",
        )


def may_decide(user: Any, grant: QuotaGrant) -> bool:
    try:
        check_may_decide(user, grant)
    except NotAllowed:
        return False
    return True


def check_may_end(user: Any, grant: QuotaGrant) -> None:
    if is_decider(user):
        return
    if grant.team_id is not None and (
        TeamMembership.objects.filter(user=user, team_id=grant.team_id).exists()
    ):
        return
    raise NotAllowed(
        "not-allowed-to-end",
        "only the grant's team, a platform admin or a global approver can end it",
    )


def may_end(user: Any, grant: QuotaGrant) -> bool:
    try:
        check_may_end(user, grant)
    except NotAllowed:
        return False
    return True
