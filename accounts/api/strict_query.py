"""Query parameters read strictly: a value the schema does not allow is a 400
that names the parameter, never silently ignored.

django-filter and DRF read leniently — ``?shared=maybe`` or ``?page_size=-3``
or ``?state=`` used to mean "no filter" or "the default" — so a client's typo
returned everything and looked like an answer. Here a boolean is ``true`` or
``false``, a number filter a whole number, a parameter is given once unless it
takes several values, and a filter that is not free text is not empty (leave
it out not to filter).
"""

from __future__ import annotations

import re
from typing import Any

import django_filters
from django import forms
from django_filters import rest_framework as filters
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail, ValidationError
from rest_framework.request import Request

_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+")
_BOOLEANS = {"true": True, "false": False}


def flag(request: Request, name: str) -> bool:
    """A boolean query parameter: ``true`` or ``false``; absent is false."""
    values = request.query_params.getlist(name)
    if not values:
        return False
    if len(values) > 1:
        raise ValidationError({name: [f"is given {len(values)} times: give it once"]})
    value = _BOOLEANS.get(values[0])
    if value is None:
        raise ValidationError({name: [f"must be true or false, not {values[0]!r}"]})
    return value


def _value_error(filter_: django_filters.Filter, values: list[str]) -> tuple[str, str] | None:
    """Why these raw values do not fit the filter: (rule, message), or None."""
    many = isinstance(filter_, django_filters.MultipleChoiceFilter | django_filters.BaseInFilter)
    if len(values) > 1 and not many:
        return "repeated", f"is given {len(values)} times: give it once"
    for value in values:
        if value == "" and not isinstance(filter_, django_filters.CharFilter):
            return "empty", "is empty: leave the parameter out not to filter by it"
        if isinstance(filter_, django_filters.BooleanFilter) and value not in _BOOLEANS:
            return "boolean", f"must be true or false, not {value!r}"
        if isinstance(filter_, django_filters.NumberFilter) and not _WHOLE_NUMBER.fullmatch(value):
            return "integer", f"must be a whole number, not {value!r}"
    return None


class StrictFilterSet(filters.FilterSet):
    """A FilterSet that refuses, with the parameter named, values its lenient
    form fields would drop."""

    def is_valid(self) -> bool:
        valid = super().is_valid()
        if not self.is_bound or not hasattr(self.data, "getlist"):
            return valid
        for name, filter_ in self.filters.items():
            problem = _value_error(filter_, self.data.getlist(name))
            if problem is not None and name in self.form.fields:
                rule, message = problem
                self.form.add_error(name, forms.ValidationError(message, code=rule))
        return self.form.is_valid()


class StrictFilterBackend(filters.DjangoFilterBackend):
    """The filter backend, its generated FilterSets strict too."""

    filterset_base = StrictFilterSet


class StrictQuerySerializer(serializers.Serializer):
    """A serializer of query parameters that refuses what DRF would skip: a
    parameter given more than once, or an empty one that is not free text."""

    def to_internal_value(self, data: Any) -> Any:
        if hasattr(data, "getlist"):
            errors: dict[str, list[ErrorDetail]] = {}
            for name, field in self.fields.items():
                values = data.getlist(name)
                if len(values) > 1:
                    message = f"is given {len(values)} times: give it once"
                    errors[name] = [ErrorDetail(message, code="repeated")]
                elif values == [""] and not isinstance(field, serializers.CharField):
                    message = "is empty: leave the parameter out not to filter by it"
                    errors[name] = [ErrorDetail(message, code="empty")]
            if errors:
                raise ValidationError(errors)
        return super().to_internal_value(data)
