"""Submit, dry run, follow, cancel and explain through the REST API, on the
simulated cluster; another team's jobs are invisible (404)."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.models import JobRequest, JobState
from jobs.services import create_on_cluster, delete_from_cluster
from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from queues.models import SimulatedEvent
from tests.jobs.conftest import Org, job

URL = "/api/v1/jobs/"


def on_cluster(kind: str = "Job") -> list[dict[str, Any]]:
    return SimulatedBackend().list(TYPES[kind])[0]


def test_a_dry_run_shows_the_manifest_where_it_lands_and_when(org: Org) -> None:
    response = org.alice.post(URL + "?dry_run=true", job(), format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["dry_run"] is True
    assert (body["team"], body["namespace"]) == ("research", "research")
    assert (body["local_queue"], body["cluster_queue"]) == ("research", "research")
    assert (body["priority_class"], body["priority"]) == ("train-low", 1000)
    main = body["manifest"][0]
    assert main["kind"] == "Job"
    assert main["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "research"
    assert body["fits_now"] is True and body["needs_preemption"] is False
    assert {f for pod_set in body["flavors"].values() for f in pod_set.values()} == {"h100"}
    assert body["queue_position"] == 1
    assert body["estimated_start"]["earliest"] is not None
    assert JobRequest.objects.count() == 0 and on_cluster() == []


def test_a_dry_run_behind_a_full_queue_does_not_fit_now(org: Org) -> None:
    from tests.jobs.test_lifecycle import admitted_workload

    # 24 GPUs (16 nominal + 8 borrowed) already held by another job.
    admitted_workload("research", "big", gpus=24, flavor="h100", runtime=3600)
    body = org.alice.post(URL + "?dry_run=true", job(), format="json").json()
    assert body["fits_now"] is False
    assert body["queue_position"] == 1
    earliest, latest = body["estimated_start"]["earliest"], body["estimated_start"]["latest"]
    assert earliest is not None and latest is not None and earliest <= latest
    assert body["explanation"]["shortfalls"], body["explanation"]


def test_submit_stores_the_rendered_manifest_and_creates_it_after_commit(
    org: Org, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = org.alice.post(URL, job(), format="json")
    assert response.status_code == 201, response.content
    stored = JobRequest.objects.get()
    assert stored.manifest[0]["metadata"]["annotations"]["berth.dev/job-request"] == str(stored.pk)
    assert stored.submitted_by == org.users["alice"]
    assert stored.state == JobState.QUEUED  # the create task ran (in-process) after commit
    [created] = on_cluster()
    assert created["metadata"]["name"] == "qwen-sft"
    assert created["spec"]["suspend"] is True
    assert stored.cluster_uid == created["metadata"]["uid"]


def test_the_create_task_run_twice_creates_once(org: Org) -> None:
    org.alice.post(URL, job(), format="json")  # on_commit not run: nothing created yet
    stored = JobRequest.objects.get()
    backend = SimulatedBackend()
    assert create_on_cluster(backend, stored.pk) == "created"
    writes = SimulatedEvent.objects.count()
    # A redelivered task after the first one finished, and one that lost the
    # race with it (state still "submitted"), both find their own object.
    assert create_on_cluster(backend, stored.pk) == "skipped"
    JobRequest.objects.filter(pk=stored.pk).update(state=JobState.SUBMITTED)
    assert create_on_cluster(backend, stored.pk) == "exists"
    assert len(on_cluster()) == 1
    assert SimulatedEvent.objects.count() == writes  # no write after the first create
    assert JobRequest.objects.get().state == JobState.QUEUED


def test_a_name_taken_by_someone_elses_object_is_rejected_not_adopted(org: Org) -> None:
    SimulatedBackend().create(
        {"apiVersion": "batch/v1", "kind": "Job",
         "metadata": {"name": "qwen-sft", "namespace": "research"}, "spec": {}}
    )  # fmt: skip
    org.alice.post(URL, job(), format="json")
    stored = JobRequest.objects.get()
    assert create_on_cluster(SimulatedBackend(), stored.pk) == "rejected"
    stored.refresh_from_db()
    assert (stored.state, stored.reason) == (JobState.REJECTED, "NameTaken")


def test_a_live_name_cannot_be_submitted_twice(org: Org) -> None:
    assert org.alice.post(URL, job(), format="json").status_code == 201
    again = org.alice.post(URL, job(), format="json")
    assert again.status_code == 400
    assert again.json()["errors"][0]["rule"] == "name-in-use"


def test_cancel_deletes_the_object_and_keeps_the_record(
    org: Org, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        job_id = org.alice.post(URL, job(), format="json").json()["id"]
    assert len(on_cluster()) == 1
    with django_capture_on_commit_callbacks(execute=True):
        response = org.alice.delete(f"{URL}{job_id}/")
    assert response.status_code == 202
    assert on_cluster() == []
    stored = JobRequest.objects.get(pk=job_id)
    assert stored.state == JobState.CANCELLED and stored.cancelled_at is not None
    assert org.alice.delete(f"{URL}{job_id}/").status_code == 409  # already ended
    assert delete_from_cluster(SimulatedBackend(), job_id) == "skipped"
    # The name is free again.
    assert org.alice.post(URL, job(), format="json").status_code == 201


def test_other_teams_jobs_are_invisible(org: Org) -> None:
    job_id = org.alice.post(URL, job(), format="json").json()["id"]
    assert org.bob.get(URL).json()["count"] == 0
    for path in (f"{URL}{job_id}/", f"{URL}{job_id}/explain/", f"{URL}{job_id}/events/"):
        assert org.bob.get(path).status_code == 404, path
        assert org.alice.get(path).status_code == 200, path
        assert org.admin.get(path).status_code == 200, path
    assert org.bob.delete(f"{URL}{job_id}/").status_code == 404
    assert JobRequest.objects.get().state == JobState.SUBMITTED
    assert org.admin.get(URL).json()["count"] == 1


def test_list_filters_by_state_team_and_queue(org: Org) -> None:
    org.alice.post(URL, job(), format="json")
    org.alice.post(URL, job(name="eval-1", queue="eval-batch", nodes=1), format="json")
    names = lambda q: {j["name"] for j in org.admin.get(URL + q).json()["results"]}  # noqa: E731
    assert names("?queue=research-eval") == {"eval-1"}
    assert names("?team=research&state=submitted") == {"qwen-sft", "eval-1"}
    assert names("?state=running") == set()
    assert names("?name=qwen-sft") == {"qwen-sft"}


def test_explain_a_job_not_yet_on_the_cluster(org: Org) -> None:
    job_id = org.alice.post(URL, job(), format="json").json()["id"]
    body = org.alice.get(f"{URL}{job_id}/explain/").json()
    assert body["state"] == "submitted"
    assert body["fits_now"] is True
    assert body["explanation"]["cluster_queue"] == "research"


@pytest.mark.parametrize("kind", ["JobSet", "PyTorchJob", "TrainJob"])
def test_every_kind_is_created_on_the_simulated_cluster(org: Org, kind: str) -> None:
    org.alice.post(URL, job(kind=kind), format="json")
    stored = JobRequest.objects.get()
    assert create_on_cluster(SimulatedBackend(), stored.pk) == "created"
    [created] = on_cluster(kind)
    assert created["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "research"


def test_the_list_costs_the_same_queries_for_more_jobs(org: Org) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert org.admin.get(URL).status_code == 200
        return len(captured)

    org.alice.post(URL, job(name="one"), format="json")
    queries()  # the token's first use is recorded once
    # Each submission moves the jobs' version: the next list is built anew.
    org.alice.post(URL, job(name="two"), format="json")
    few = queries()
    for name in ("three", "four", "five"):
        org.alice.post(URL, job(name=name, queue="eval-batch", nodes=1), format="json")
    assert queries() == few


@pytest.mark.parametrize(
    ("given", "seconds"),
    [(7200, 7200), ("7200", 7200), ("2h", 7200), ("90m", 5400), ("1h30m", 5400), (" 1D ", 86400)],
)
def test_runtimes_take_durations_as_well_as_seconds(org: Org, given: Any, seconds: int) -> None:
    response = org.alice.post(
        URL, job(max_runtime_seconds=given, expected_runtime_seconds=given), format="json"
    )
    assert response.status_code == 201, response.content
    stored = JobRequest.objects.get()
    assert (stored.max_runtime_seconds, stored.expected_runtime_seconds) == (seconds, seconds)
    assert response.json()["max_runtime_seconds"] == seconds  # answered in seconds, as stored
    labels = stored.manifest[0]["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/max-exec-time-seconds"] == str(seconds)


def test_the_team_page_form_takes_durations_too(org: Org, client: Any) -> None:
    # The form posts strings through the same serializer as the API.
    client.force_login(org.users["alice"])
    form = {
        **{k: str(v) for k, v in job().items() if k != "command"},
        "command": "python train.py",
        "max_runtime_seconds": "2h",
        "expected_runtime_seconds": "45m",
        "submit": "1",
    }
    response = client.post("/teams/research/", form)
    assert response.status_code in (200, 302), response.content[:500]
    stored = JobRequest.objects.get()
    assert (stored.max_runtime_seconds, stored.expected_runtime_seconds) == (7200, 2700)


@pytest.mark.parametrize(
    ("field", "given", "rule", "words"),
    [
        ("max_runtime_seconds", "2x", "duration", "'2x' is not a duration: use seconds"),
        ("max_runtime_seconds", "1h30", "duration", "give every number a unit"),
        ("expected_runtime_seconds", "soon", "duration", "15m, 2h, 1d, 1h30m"),
        ("max_runtime_seconds", "30s", "min_value", "must be at least 1m (60 s)"),
        ("max_runtime_seconds", "91d", "max_value", "must be at most 90d (7776000 s)"),
        ("expected_runtime_seconds", 0, "min_value", "must be at least 1s (1 s)"),
        ("max_runtime_seconds", "", "duration", "'' is not a duration"),
    ],
)
def test_a_bad_duration_is_refused_naming_the_field_and_rule(
    org: Org, field: str, given: Any, rule: str, words: str
) -> None:
    response = org.alice.post(URL, job(**{field: given}), format="json")
    assert response.status_code == 400, response.content
    [error] = response.json()["errors"]
    assert (error["field"], error["rule"]) == (field, rule)
    assert words in error["message"], error["message"]
    assert JobRequest.objects.count() == 0


# --- where a job can go: GET jobs/queues/ ------------------------------------------


def spot_in_a_class_that_refuses_it() -> None:
    """research-mixed: interactive-dev (no spot) holding on-demand and spot quota,
    as the demo's platform queue once did."""
    from tests.factories import cluster_queue
    from tests.jobs.conftest import gpus

    cluster_queue(
        "research-mixed", team="research", cohort="org", queue_class="interactive-dev",
        resource_groups=gpus(("h100", "0"), ("h100-spot", "8"), borrowing_limit="16"),
    )  # fmt: skip


def test_queues_offer_only_the_flavors_a_job_there_may_use(org: Org) -> None:
    spot_in_a_class_that_refuses_it()
    body = org.alice.get(URL + "queues/").json()
    rows = {row["local_queue"]: row for row in body["results"]}
    assert set(rows) == {"research", "research-dev", "research-eval", "research-mixed", "urgent"}
    mixed = rows["research-mixed"]
    assert (mixed["queue_class"], mixed["shared"], mixed["spot"]) == (
        "interactive-dev", False, False,
    )  # fmt: skip
    assert [f["name"] for f in mixed["flavors"]] == ["h100"]
    assert mixed["flavors"][0]["quota"] == [
        {"resource": "nvidia.com/gpu", "nominal_quota": "0", "borrowing_limit": "16",
         "lending_limit": None}
    ]  # fmt: skip
    assert mixed["unusable_flavors"] == [
        {"name": "h100-spot",
         "reason": "spot capacity, and queue class interactive-dev does not run jobs on spot"}
    ]  # fmt: skip
    # eval-batch runs on spot: both flavors are offered.
    evaluation = rows["research-eval"]
    assert evaluation["spot"] is True
    assert [(f["name"], f["spot"]) for f in evaluation["flavors"]] == [
        ("h100", False), ("h100-spot", True),
    ]  # fmt: skip
    assert evaluation["unusable_flavors"] == [] and evaluation["problem"] == ""
    assert (rows["urgent"]["shared"], rows["urgent"]["team"]) == (True, None)

    # The submit agrees: the queue's spot quota is not for its jobs.
    response = org.alice.post(
        URL + "?dry_run=true", job(queue="research-mixed", nodes=1), format="json"
    )
    assert response.status_code == 200, response.content
    assert {f for p in response.json()["flavors"].values() for f in p.values()} == {"h100"}


def test_queues_of_one_team_or_all(org: Org) -> None:
    def only(query: str) -> set[str]:
        return {r["local_queue"] for r in org.alice.get(URL + "queues/" + query).json()["results"]}

    assert only("?team=serving") == {"serving", "urgent"}
    assert "serving" in only("?all=true") and "research" in only("?all=true")
    assert only("?team=no-such-team") == set()
    assert org.bob.get(URL + "queues/").json()["count"] == 2  # serving's own and the shared one


def test_a_queue_no_job_can_use_says_why(org: Org) -> None:
    from tests.factories import cluster_queue, flavor
    from tests.jobs.conftest import gpus

    # Spot only, in a class that refuses spot.
    cluster_queue(
        "research-spot", team="research", cohort="org", queue_class="interactive-dev",
        resource_groups=gpus(("h100-spot", "8")),
    )  # fmt: skip
    # A spot flavor pods cannot be kept off: no label of its own, no taint.
    flavor("h100-spot-bare", node_labels={"gpu": "h100"}, capacity_type="spot")
    cluster_queue(
        "research-bare", team="research", cohort="org", queue_class="training-large",
        resource_groups=gpus(("h100", "8"), ("h100-spot-bare", "8")),
    )  # fmt: skip
    rows = {r["local_queue"]: r for r in org.alice.get(URL + "queues/").json()["results"]}
    assert rows["research-spot"]["flavors"] == []
    assert rows["research-spot"]["problem"] == (
        "ClusterQueue research-spot has only spot flavors and its queue class interactive-dev "
        "does not run jobs on spot capacity, so no job can run there; use another queue"
    )
    assert rows["research-bare"]["flavors"] == []
    assert rows["research-bare"]["problem"].startswith(
        "pods cannot be kept off flavor h100-spot-bare"
    )
    # The submit refuses both for the same reasons, on the queue.
    for queue, rule in (
        ("research-spot", "spot-only-queue"),
        ("research-bare", "flavor-not-excludable"),
    ):
        response = org.alice.post(URL, job(queue=queue, nodes=1), format="json")
        assert response.status_code == 400, response.content
        assert {(e["field"], e["rule"]) for e in response.json()["errors"]} >= {("queue", rule)}
