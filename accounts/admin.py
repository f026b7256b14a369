from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from accounts.models import AccessDenial, ApiToken, SingleSignOnIdentity
from accounts.services import revoke_token


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = [
        "user",
        "name",
        "prefix",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["revoked_at"]
    search_fields = ["user__username", "name", "prefix"]
    readonly_fields = [
        "user",
        "name",
        "prefix",
        "digest",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
    ]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # tokens are issued through the API, which shows the secret once

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        count = sum(revoke_token(token) for token in queryset)
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)


@admin.register(AccessDenial)
class AccessDenialAdmin(admin.ModelAdmin):
    list_display = ["at", "username", "reason", "method", "path", "remote_addr"]
    list_filter = ["reason"]
    search_fields = ["username", "path"]
    date_hierarchy = "at"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(SingleSignOnIdentity)
class SingleSignOnIdentityAdmin(admin.ModelAdmin):
    """Who signs in through the identity provider, and the groups it last sent.
    Deleting a link lets the provider's person be linked afresh (by username)."""

    list_display = ["user", "subject", "issuer", "last_sign_in_at"]
    search_fields = ["user__username", "subject"]
    readonly_fields = ["user", "issuer", "subject", "groups", "linked_at", "last_sign_in_at"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # made at the first single sign-on
