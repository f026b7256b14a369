from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from accounts.lockout import refuse_locked_out_address
from accounts.services import find_active_token


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer berth_…`` (``Token berth_…`` is accepted too)."""

    keywords = ("bearer", "token")

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if not header or header[0].lower() not in self.keywords:
            return None
        refuse_locked_out_address(request._request)
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(
                "Malformed Authorization header: expected 'Bearer <token>'."
            )
        token = find_active_token(header[1])
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed(
                "Unknown, revoked or expired token: create a new one at /api/v1/tokens/."
            )
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="berth"'
