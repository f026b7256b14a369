"""The job requests teams submit (``requests``); what the cluster did with
them is the cluster app's (``cluster.models``)."""

from jobs.models.requests import TERMINAL_STATES, JobKind, JobRequest, JobState
from jobs.models.versions import TeamJobsVersion

__all__ = ["TERMINAL_STATES", "JobKind", "JobRequest", "JobState", "TeamJobsVersion"]
