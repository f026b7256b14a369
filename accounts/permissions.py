from __future__ import annotations

from typing import Any

from rest_framework import permissions
from rest_framework.request import Request

from accounts.roles import is_platform_admin


class PlatformAdminOnly(permissions.BasePermission):
    message = "Only platform admins can see this."

    def has_permission(self, request: Request, view: Any) -> bool:
        return is_platform_admin(request.user)
