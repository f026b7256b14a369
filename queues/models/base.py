from __future__ import annotations

from django.db import models


class PolicyObject(models.Model):
    """Common bookkeeping of every policy object.

    ``revision`` counts saved changes; clients send it back in ``If-Match`` so a
    stale edit is refused instead of silently overwriting someone else's.
    """

    revision = models.PositiveIntegerField(default=1, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
