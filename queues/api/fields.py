"""Serializer building blocks: strict objects, plain-worded choices, quantities."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import models
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know, so a typo (``borowing_limit``) is an error
    instead of a silently ignored setting."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                known = ", ".join(name for name, f in self.fields.items() if not f.read_only)
                raise serializers.ValidationError(
                    {
                        key: [
                            serializers.ErrorDetail(
                                f"is not a known field; expected one of: {known}",
                                code="unknown-field",
                            )
                        ]
                        for key in unknown
                    }
                )
        return super().to_internal_value(data)


class KueueChoiceField(serializers.ChoiceField):
    """A choice whose error lists what is allowed, in Kueue's spelling, under the
    same rule identifier the services use (``unsupported-value``)."""

    def to_internal_value(self, data: Any) -> Any:
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError:
            allowed = ", ".join(str(v) for v in self.choices if v)
            raise serializers.ValidationError(
                f"{data!r} is not supported: use one of {allowed}", code="unsupported-value"
            ) from None


def choice(choices: type[models.TextChoices], **kwargs: Any) -> serializers.ChoiceField:
    return KueueChoiceField(choices=choices.choices, **kwargs)


@extend_schema_field(OpenApiTypes.STR)
class QuantityField(serializers.Field):
    """A Kubernetes quantity as a string (``500m``, ``4Ti``) or a whole number.

    Parsing happens in the policy rules, which know the resource the quantity is
    for (milli-CPU, bytes or a count)."""

    default_error_messages = {
        "invalid": "must be a Kubernetes quantity such as 64, 500m or 4Ti",
    }

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, bool) or not isinstance(data, str | int | float):
            self.fail("invalid")
        if isinstance(data, float):
            return repr(data)
        return data

    def to_representation(self, value: Any) -> Any:
        return value


@extend_schema_field(OpenApiTypes.STR)
class WeightField(QuantityField):
    """A fair-sharing weight: a non-negative quantity such as ``1``, ``0.5`` or ``2``."""
