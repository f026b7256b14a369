"""The jobs app's figures for ``/metrics``: job requests by state (1 GROUP
BY; every state is listed, zero or not)."""

from __future__ import annotations

from collections.abc import Iterator

from jobs.models import JobState
from jobs.selectors import job_counts
from queues.metric_families import Family, gauge


class JobsCollector:
    def collect(self) -> Iterator[Family]:
        jobs = gauge("berth_jobs", "Job requests submitted through Berth, by state.")
        counts = job_counts()
        for state in JobState:
            jobs.add(counts.get(state.value, 0), {"state": state.value})
        yield jobs
