"""Time filters for the API's lists (``since``, ``until``, ``submitted_before``):
ISO 8601 with any offset Python accepts, compared in UTC.

PostgreSQL refuses a time-zone displacement beyond ±15:59 that Python and ISO
8601 allow (``+19:00``), so a filter's time is converted to UTC before it
reaches a query; a time that cannot be expressed in UTC (the year 9999 at
``-05:00``) is refused with the field named.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django import forms
from django_filters import rest_framework as filters
from django_filters.fields import IsoDateTimeField


class _UtcIsoDateTimeField(IsoDateTimeField):
    default_error_messages = {
        "out-of-range": "%(value)s cannot be expressed in UTC: use a time between the years 1 "
        "and 9999 in UTC"
    }

    def to_python(self, value: Any) -> datetime | None:
        moment = super().to_python(value)
        if moment is None or moment.tzinfo is None:
            return moment
        try:
            return moment.astimezone(UTC)
        except OverflowError:
            raise forms.ValidationError(
                self.error_messages["out-of-range"], code="out-of-range", params={"value": value}
            ) from None


class UtcDateTimeFilter(filters.IsoDateTimeFilter):
    """``IsoDateTimeFilter`` whose time is compared in UTC."""

    field_class = _UtcIsoDateTimeField
