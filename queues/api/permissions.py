from __future__ import annotations

from typing import Any

from rest_framework import permissions
from rest_framework.request import Request

from accounts.permissions import PlatformAdminOnly
from queues.access import may_change_policy

__all__ = ["PlatformAdminOnly", "ReadPolicyOrAdminWrites"]


class ReadPolicyOrAdminWrites(permissions.BasePermission):
    """Every signed-in user reads the policy; only platform admins change it."""

    message = "Only platform admins change policy; ask one, or read it with GET."

    def has_permission(self, request: Request, view: Any) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        if request.method in permissions.SAFE_METHODS:
            return True
        return may_change_policy(request.user)
