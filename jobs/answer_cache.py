"""Answers built from job requests, cached under the jobs versions PostgreSQL
keeps per team (``jobs.models.versions``). Many people read the same list or
the same counts; each process builds an answer once per change of the jobs it
reads and hands the same answer to every reader until then. The versions move
in the transaction of the change, so a cached answer is never older than what
the reader could see; the version is read before the answer is built, so an
answer can only be filed under a version at or before its own data."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import TypeVar

from django.core.cache import cache
from django.db import connection

from jobs.models import TeamJobsVersion

T = TypeVar("T")

# An answer unused for this long is dropped (the versions, not this, keep answers fresh).
KEEP_SECONDS = 300


def jobs_version(team_ids: Iterable[int] | None) -> str | None:
    """A short key naming the state of these teams' job requests (every team's
    for None), or None where the database keeps no versions (SQLite)."""
    if connection.vendor != "postgresql":
        return None
    rows = TeamJobsVersion.objects.all()
    if team_ids is not None:
        rows = rows.filter(team_id__in=list(team_ids))
    pairs = ",".join(f"{t}:{v}" for t, v in rows.order_by("team_id").values_list("team", "version"))
    return hashlib.blake2b(pairs.encode(), digest_size=12).hexdigest()


def cached_answer(
    topic: str, team_ids: Iterable[int] | None, detail: str, build: Callable[[], T]
) -> T:
    """``build()``'s answer for the jobs of ``team_ids`` (None: every team's),
    from the cache while those jobs have not changed. ``detail`` names
    everything else the answer depends on (the URL, the format …)."""
    teams = None if team_ids is None else sorted(set(team_ids))
    version = jobs_version(teams)
    if version is None:
        return build()
    scope = "all" if teams is None else ",".join(map(str, teams))
    key = (
        "jobs:"
        + hashlib.blake2b(
            f"{topic}|{scope}|{detail}|{version}".encode(), digest_size=16
        ).hexdigest()
    )
    found = cache.get(key)
    if found is not None:
        return found
    answer = build()
    cache.set(key, answer, KEEP_SECONDS)
    return answer
