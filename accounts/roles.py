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


def is_platform_admin(user: Any) -> bool:
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    if user.is_superuser:
        return True
    return bool(user.groups.filter(name=PLATFORM_ADMINS_GROUP).exists())


def is_global_approver(user: Any) -> bool:
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    return bool(user.groups.filter(name=APPROVERS_GROUP).exists())
