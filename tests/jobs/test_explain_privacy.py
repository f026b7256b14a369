"""Why a job waits names what holds the quota and what stands ahead; another
team's workloads among them read as that team's, as on the queue pages (the
API, `berth why` and the job page alike). Admins read every name."""

from __future__ import annotations

from queues.access import other_teams_masked
from tests.jobs.conftest import Org

ANSWER = {
    "message": "Waits behind serving/job-launch and research/job-eval for nvidia.com/gpu",
    "explanation": {
        "taken_by": [{"workload": "serving/job-launch", "cluster_queue": "urgent"}],
        "ahead": ["research/job-eval", "serving/job-launch-2"],
    },
}
NAMESPACES = ["research", "serving"]


def test_a_member_reads_another_teams_workloads_as_theirs(org: Org) -> None:
    seen = other_teams_masked(org.users["alice"], ANSWER, NAMESPACES)
    assert seen["message"] == (
        "Waits behind a workload of team serving and research/job-eval for nvidia.com/gpu"
    )
    assert seen["explanation"]["taken_by"][0]["workload"] == "a workload of team serving"
    assert seen["explanation"]["ahead"] == ["research/job-eval", "a workload of team serving"]
    assert "launch" not in str(seen)


def test_an_admin_reads_every_name(org: Org) -> None:
    assert other_teams_masked(org.users["admin"], ANSWER, NAMESPACES) == ANSWER
