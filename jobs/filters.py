"""Filter sets for job requests, shared by the API and (later) the dashboard."""

from __future__ import annotations

import django_filters as filters

from accounts.api.moments import UtcDateTimeFilter
from accounts.api.strict_query import StrictFilterSet
from jobs.models import JobKind, JobRequest, JobState


class JobFilter(StrictFilterSet):
    team = filters.CharFilter(field_name="team__slug")
    queue = filters.CharFilter(field_name="cluster_queue")
    # No DISTINCT: one row per job whatever the states asked for.
    state = filters.MultipleChoiceFilter(choices=JobState.choices, distinct=False)
    kind = filters.ChoiceFilter(choices=JobKind.choices)
    submitted_after = UtcDateTimeFilter(field_name="submitted_at", lookup_expr="gte")
    submitted_before = UtcDateTimeFilter(field_name="submitted_at", lookup_expr="lt")

    class Meta:
        model = JobRequest
        fields = ["name", "namespace", "local_queue", "priority_class", "queue_class"]
