"""Lookups of objects the user may not see, logged.

Viewsets whose queryset holds only what the user may see (another team's jobs,
approvals, someone else's token) answer 404 for the rest, as if it did not
exist; with this mixin the attempt is also recorded in the access log, as
every refusal is.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404

from accounts.models import AccessDenial
from accounts.services import record_access_denial


class HiddenObjectsLogged:
    """For viewsets whose queryset holds only what the user may see: looking
    up an object that exists but is not theirs still answers 404, as if it did
    not exist, and the attempt is recorded in the access log."""

    def get_object(self) -> Any:
        try:
            return super().get_object()  # type: ignore[misc]
        except Http404:
            view: Any = self
            lookup = view.lookup_url_kwarg or view.lookup_field
            model = view.get_queryset().model
            value = view.kwargs.get(lookup)
            if model._default_manager.filter(**{view.lookup_field: value}).exists():
                record_access_denial(
                    view.request,
                    reason=AccessDenial.Reason.FORBIDDEN,
                    detail=f"{model._meta.verbose_name} {value}: not the user's to see",
                )
            raise
