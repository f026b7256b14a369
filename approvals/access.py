"""Who may see and decide approval requests.

An approver for a request is a platform admin, a global approver (group
``approvers``), or an approver of the team that owns the request's ClusterQueue;
a shared ClusterQueue (no owning team, as ``urgent-release`` usually is) is
answered by the approvers of the team whose job it is. The person who submitted
the job never decides it, whatever else they are.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet
from django.utils import timezone

from accounts.roles import (
    APPROVERS_GROUP,
    PLATFORM_ADMINS_GROUP,
    is_global_approver,
    is_platform_admin,
)
from approvals.models import ApprovalRequest, ApprovalState
from queues.choices import TeamRole
from queues.models import ClusterQueue, TeamMembership


class NotAllowed(Exception):
    """The user may not decide this request; ``rule`` is stable for clients."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule
        self.message = message


def _approver_team_ids(user: Any) -> QuerySet[TeamMembership, Any]:
    """The teams ``user`` approves for, as a subquery (no query of its own)."""
    return TeamMembership.objects.filter(user=user, role=TeamRole.APPROVER).values("team_id")


def _deciding_team_filter(user: Any) -> Q:
    """Requests whose deciding team ``user`` approves for: the queue's owner,
    or (for a shared queue) the job's team. Subqueries: one SQL statement."""
    teams = _approver_team_ids(user)
    owned = ClusterQueue.objects.filter(team_id__in=teams).values("name")
    shared = ClusterQueue.objects.filter(team__isnull=True).values("name")
    return Q(cluster_queue__in=owned) | Q(cluster_queue__in=shared, team_id__in=teams)


def _sees_everything(user: Any) -> bool:
    return is_platform_admin(user) or is_global_approver(user)


def is_approver_anywhere(user: Any) -> bool:
    if not getattr(user, "is_authenticated", False):
        return False
    return is_platform_admin(user) or is_global_approver(user) or bool(_approver_team_ids(user))


def decidable_by(user: Any) -> QuerySet[ApprovalRequest]:
    """Requests ``user`` may decide (whatever their state), their own left out."""
    requests = ApprovalRequest.objects.all()
    if not getattr(user, "is_authenticated", False):
        return requests.none()
    if not _sees_everything(user):
        requests = requests.filter(_deciding_team_filter(user))
    return requests.exclude(requester=user)


def decidable_now(user: Any) -> QuerySet[ApprovalRequest]:
    """Pending requests ``user`` may decide, still before their deadline (one
    past it is expired, whether or not a controller pass has said so yet)."""
    return decidable_by(user).filter(state=ApprovalState.PENDING, expires_at__gt=timezone.now())


def visible_to(user: Any) -> QuerySet[ApprovalRequest]:
    """Requests ``user`` may see: those they may decide, plus their teams' own
    (a member follows the approval of the team's job, and sees who decided)."""
    if not getattr(user, "is_authenticated", False):
        return ApprovalRequest.objects.none()
    if _sees_everything(user):
        return ApprovalRequest.objects.all()
    members = TeamMembership.objects.filter(user=user).values("team_id")
    return ApprovalRequest.objects.filter(
        _deciding_team_filter(user) | Q(team_id__in=members) | Q(requester=user)
    )


def check_may_decide(user: Any, request: ApprovalRequest) -> None:
    """NotAllowed unless ``user`` may decide ``request``."""
    if request.requester_id is not None and request.requester_id == getattr(user, "pk", None):
        raise NotAllowed(
            "requester-cannot-decide",
            "you submitted this job: another approver for the queue has to decide it",
        )
    if not decidable_by(user).filter(pk=request.pk).exists():
        raise NotAllowed(
            "not-an-approver",
            f"only an approver for ClusterQueue {request.cluster_queue} or a platform admin "
            "can decide this request",
        )


def approvers_for(request: ApprovalRequest) -> list[Any]:
    """The people to notify of ``request``: its team's (or queue owner's)
    approvers and the global approvers; admins only when nobody else can decide.
    The requester is never among them."""
    users = get_user_model().objects.filter(is_active=True)
    queue_team = (
        ClusterQueue.objects.filter(name=request.cluster_queue).values_list("team_id", flat=True)
    ).first()
    deciding_team = queue_team if queue_team is not None else request.team_id
    chosen = users.filter(
        Q(groups__name=APPROVERS_GROUP)
        | Q(team_memberships__role=TeamRole.APPROVER, team_memberships__team_id=deciding_team)
    )
    if request.requester_id is not None:
        chosen = chosen.exclude(pk=request.requester_id)
    found = list(chosen.distinct().order_by("username"))
    if not found:
        admins = users.filter(Q(is_superuser=True) | Q(groups__name=PLATFORM_ADMINS_GROUP))
        if request.requester_id is not None:
            admins = admins.exclude(pk=request.requester_id)
        found = list(admins.distinct().order_by("username"))
    return found
