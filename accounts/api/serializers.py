from __future__ import annotations

from rest_framework import serializers

from accounts.api.strict_fields import TextField
from accounts.models import AccessDenial, ApiToken


class ApiTokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created_at", "expires_at", "last_used_at", "revoked_at"]
        read_only_fields = fields


class NewApiTokenSerializer(serializers.Serializer):
    name = TextField(max_length=100, help_text="What the token is for, e.g. ci")
    expires_in_days = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=3650,
        help_text="Empty for a token that does not expire",
    )


class IssuedApiTokenSerializer(ApiTokenSerializer):
    token = serializers.CharField(read_only=True, help_text="Shown once; store it now")

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "token"]
        read_only_fields = fields


class AccessDenialSerializer(serializers.ModelSerializer):
    class Meta:
        model = AccessDenial
        fields = ["id", "at", "username", "reason", "method", "path", "detail", "remote_addr"]
        read_only_fields = fields
