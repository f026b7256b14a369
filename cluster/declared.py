"""What a workload's submitter declared of its runtime, for forecasts.

The cluster app records workloads; it cannot know who submitted one or what
they declared. The app that does (jobs) registers a source at start-up, as a
lower layer may not import a higher one. With no source registered, nothing
is declared and forecasts use the runtimes recorded here.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db.models import QuerySet

from cluster.models import WorkloadRecord

# Of these workloads, the seconds each one's submitter declared (expected,
# else the limit); workloads nobody declared anything for are left out.
Source = Callable[[QuerySet[WorkloadRecord]], dict[int, int]]
_sources: list[Source] = []


def register(source: Source) -> None:
    if source not in _sources:
        _sources.append(source)


def declared_seconds(workloads: QuerySet[WorkloadRecord]) -> dict[int, int]:
    """Workload id -> declared seconds, from every registered source."""
    found: dict[int, int] = {}
    for source in _sources:
        found.update(source(workloads))
    return found
