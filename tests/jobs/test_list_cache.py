"""The job list and the job counts are built once per change of the jobs they
read (``jobs.answer_cache``): a repeated read reads no job, and any committed
change — by the API, by ``update()``, by another connection — shows at once."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.models import JobRequest, JobState
from jobs.selectors import job_counts
from tests.database import worker_database_url
from tests.jobs.conftest import Org, job

URL = "/api/v1/jobs/"


def job_reads(client: Any, url: str = URL) -> tuple[dict[str, Any], int]:
    """The list's body, and how many queries read the job table for it."""
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, response.content
    reads = [q for q in captured if 'FROM "jobs_jobrequest"' in q["sql"]]
    return response.json(), len(reads)


def states(body: dict[str, Any]) -> dict[str, str]:
    return {row["name"]: row["state"] for row in body["results"]}


def test_a_repeated_list_reads_no_job(org: Org) -> None:
    org.alice.post(URL, job(name="one"), format="json")
    first, built = job_reads(org.alice)
    again, reads = job_reads(org.alice)
    assert built > 0 and reads == 0
    assert again == first and first["count"] == 1


def test_a_change_made_by_update_shows_at_once(org: Org) -> None:
    org.alice.post(URL, job(name="one"), format="json")
    assert states(job_reads(org.alice)[0]) == {"one": JobState.SUBMITTED}
    # No signal, no save(): only the database knows.
    JobRequest.objects.filter(name="one").update(state=JobState.FAILED)
    assert states(job_reads(org.alice)[0]) == {"one": JobState.FAILED}
    assert job_counts()[JobState.FAILED] == 1


def test_another_teams_change_leaves_a_teams_answer_alone(org: Org) -> None:
    org.alice.post(URL, job(name="ours"), format="json")
    org.bob.post(URL, job(name="theirs", queue="serving"), format="json")
    job_reads(org.alice), job_reads(org.bob), job_reads(org.admin)
    JobRequest.objects.filter(name="theirs").update(state=JobState.FAILED)
    assert job_reads(org.alice)[1] == 0  # research's jobs did not move
    bob, rebuilt = job_reads(org.bob)
    assert rebuilt > 0 and states(bob) == {"theirs": JobState.FAILED}
    admin, rebuilt = job_reads(org.admin)
    assert rebuilt > 0 and states(admin)["theirs"] == JobState.FAILED


def test_each_url_and_each_team_has_its_own_answer(org: Org) -> None:
    org.alice.post(URL, job(name="ours"), format="json")
    org.bob.post(URL, job(name="theirs", queue="serving"), format="json")
    assert set(states(job_reads(org.alice)[0])) == {"ours"}
    assert set(states(job_reads(org.bob)[0])) == {"theirs"}
    assert set(states(job_reads(org.admin)[0])) == {"ours", "theirs"}
    assert set(states(job_reads(org.admin, URL + "?team=serving")[0])) == {"theirs"}


@pytest.mark.django_db(transaction=True)
def test_a_change_committed_by_another_process_shows_at_once(org: Org) -> None:
    org.alice.post(URL, job(name="one"), format="json")  # created at once: committed
    assert states(job_reads(org.alice)[0]) == {"one": JobState.QUEUED}
    assert job_counts() == {JobState.QUEUED: 1}
    with psycopg.connect(worker_database_url(), autocommit=True) as other:
        other.execute("UPDATE jobs_jobrequest SET state = 'running' WHERE name = 'one'")
    assert states(job_reads(org.alice)[0]) == {"one": JobState.RUNNING}
    assert job_counts() == {JobState.RUNNING: 1}
