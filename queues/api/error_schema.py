"""The error answers every operation can give, declared in the OpenAPI schema
as the API really sends them (``queues.api.conventions`` makes them), so a
client generated from the schema knows a 400's ``errors`` and a 409's
``references``."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import inline_serializer
from rest_framework import serializers


class ErrorSerializer(serializers.Serializer):
    """Not signed in, not allowed, not found: what happened, and for a refused
    action the rule that refused it."""

    detail = serializers.CharField()
    rule = serializers.CharField(required=False)


class FieldErrorSerializer(serializers.Serializer):
    field = serializers.CharField(help_text="path of the field, e.g. resource_groups[0].flavors")
    rule = serializers.CharField(help_text="stable name of the rule the value breaks")
    message = serializers.CharField()


# A class could not declare `errors`: Serializer.errors is the validation result.
InvalidRequestSerializer = inline_serializer(
    "InvalidRequest",
    fields={"detail": serializers.CharField(), "errors": FieldErrorSerializer(many=True)},
)


class ConflictSerializer(serializers.Serializer):
    """The change conflicts with what is stored (409) or with the revision the
    client last read (412)."""

    detail = serializers.CharField()
    rule = serializers.CharField()
    references = serializers.DictField()


_WRITES = ("POST", "PUT", "PATCH", "DELETE")


class BerthAutoSchema(AutoSchema):
    """drf-spectacular's schema, with the error responses of each operation."""

    def _error_responses(self) -> dict[str, Any]:
        responses: dict[str, Any] = {
            # Any request can be refused as bad input: a NUL in its path or
            # query is refused before the view runs (controlplane.text_guard).
            "400": InvalidRequestSerializer,
            "401": ErrorSerializer,
            "403": ErrorSerializer,
            # Locked out after repeated refused tokens (accounts.lockout).
            "429": ErrorSerializer,
        }
        if "{" in self.path or self._paginated():
            # An object that is not there or not yours; a page past the last.
            responses["404"] = ErrorSerializer
        if self.method in _WRITES:
            responses["409"] = ConflictSerializer
            responses["412"] = ConflictSerializer
        if self.method in ("POST", "PUT", "PATCH"):
            responses["413"] = ErrorSerializer  # a body over DATA_UPLOAD_MAX_MEMORY_SIZE
            responses["415"] = ErrorSerializer
        return responses

    def _paginated(self) -> bool:
        return (
            self.method == "GET"
            and getattr(self.view, "pagination_class", None) is not None
            and self._is_list_view()
        )

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        for code, serializer in self._error_responses().items():
            if code not in responses:
                responses[code] = self._get_response_for_code(
                    serializer, code, media_types=["application/json"], direction=direction
                )
        return responses
