"""Serializer fields that take JSON as it is written: DRF's CharField turns
``0`` into ``"0"``, so a client that sent a number where text belongs never
hears of its mistake."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class TextField(serializers.CharField):
    """A CharField that refuses numbers, booleans and anything but a JSON string."""

    default_error_messages = {"not-text": "must be text (a JSON string), not {kind}"}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not-text", kind=type(data).__name__)
        return str(super().to_internal_value(data))
