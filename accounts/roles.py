"""Who may do what. Roles:

- platform admin: a superuser, or a member of the ``platform-admins`` group;
  changes policy.
- approver: global (group ``approvers``) or for a team (``TeamMembership`` role
  approver); decides approval requests.
- team member: ``TeamMembership`` role member; submits and sees the team's jobs.

Every signed-in user reads the policy itself.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

PLATFORM_ADMINS_GROUP = "platform-admins"
APPROVERS_GROUP = "approvers"

UserLike = AbstractBaseUser | AnonymousUser


def _group_names(user: Any) -> frozenset[str]:
    """The user's groups, read once per user object (a page asks several
    times). Like Django's own permission cache, a group change shows on the
    next request, which loads the user anew."""
    names = getattr(user, "_berth_group_names", None)
    if names is None:
        names = frozenset(user.groups.values_list("name", flat=True))
        user._berth_group_names = names
    return names


def is_platform_admin(user: Any) -> bool:
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    if user.is_superuser:
        return True
    return PLATFORM_ADMINS_GROUP in _group_names(user)


def is_global_approver(user: Any) -> bool:
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    return APPROVERS_GROUP in _group_names(user)
