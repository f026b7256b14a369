"""The dashboard in headless Chromium, signed in as each role.

To cover a new page, add one ``Visit`` to ``PAGES``: the path, who looks at it
(a key of ``ROLES``) and the text it must show. ``test_page`` then signs in as
that role, opens the page, checks the text is visible, that no request left
the machine and that the console stayed clean, and saves a screenshot named
after the path and role.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any, NamedTuple

import pytest
from django.utils import timezone
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, expect

from cluster.models import CapacitySnapshot, QueueSnapshot
from jobs import services as job_services
from jobs.models import JobRequest
from queues import services
from queues.models import (
    Team,
)
from tests import factories
from tests.browser.conftest import Guard, is_local, login, screenshot

pytestmark = pytest.mark.browser

# Role -> the username factories.role_users() gives it (None: not signed in).
ROLES: dict[str, str | None] = {
    "anonymous": None,
    "admin": "admin",
    "member": "member-a",  # member of team alpha
    "approver": "approver-a",  # approver of team alpha
}


class Visit(NamedTuple):
    path: str
    role: str  # a key of ROLES
    expected: str | tuple[str, ...]  # text(s) that must be visible on the page

    @property
    def texts(self) -> tuple[str, ...]:
        return (self.expected,) if isinstance(self.expected, str) else self.expected

    @property
    def name(self) -> str:
        slug = self.path.strip("/").replace("/", "-") or "home"
        return f"{slug}-{self.role}"


PAGES: list[Visit] = [
    Visit("/", "admin", ("Overview", "GPUs on the cluster", "Policy on the cluster")),
    Visit("/", "member", ("Overview", "your teams' Berth jobs running")),
    Visit("/", "approver", ("Overview", "Worst p95 waits")),
    Visit("/", "anonymous", "Sign in"),  # the home page asks for a login first
    Visit("/login/", "anonymous", ("Sign in", "Username", "Password")),
    Visit("/queues/", "admin", ("Queues", "alpha", "p95 24 h")),
    Visit("/queues/", "member", ("Queues", "alpha")),
    Visit("/queues/alpha/", "member", ("ClusterQueue alpha", "Kueue objects Berth renders")),
    Visit("/cohorts/", "member", ("Cohorts", "The lending tree", "shared")),
    Visit("/whatif/", "admin", ("What-if", "1. The workloads", "Workloads sync recorded")),
    Visit("/policy/", "admin", ("Cluster queues", "alpha", "Topologies", "gpu-racks")),
    Visit(
        "/policy/topology/gpu-racks/",
        "admin",
        ("Topology gpu-racks", "Levels (node labels, widest first)", "topology.berth.dev/rack"),
    ),
    Visit(
        "/policy/kueue-configuration/",
        "admin",
        ("Kueue configuration", "Wait for pods ready", "now: 5 min (5m)"),
    ),
    Visit("/jobs/", "admin", ("Jobs", "warmup")),
    Visit("/jobs/", "member", ("Jobs", "warmup")),
    Visit("/teams/alpha/", "member", ("Team Alpha", "Submit a job", "Your API tokens")),
    Visit("/teams/alpha/", "approver", ("Team Alpha", "What you can borrow right now")),
    Visit("/", "approver", ("Approvals", "Open the approvals inbox")),
    Visit("/approvals/", "approver", ("Approvals", "Waiting for your decision", "Decided lately")),
    Visit("/approvals/", "admin", ("Approvals", "Nothing waits for your decision")),
    Visit("/approvals/?state=all", "approver", ("Approvals", "No requests.")),
    Visit("/approvals/history/", "approver", ("Approvals history", "Export CSV")),
    Visit("/approvals/history/", "admin", ("Approvals history", "No approval events")),
]
# Pages Berth serves but does not write (no Berth header): they must satisfy its
# Content-Security-Policy too, which the guard's console check proves.
LIBRARY_PAGES: list[Visit] = [
    Visit("/api/docs/", "admin", ("Berth API", "/api/v1/jobs/")),
    Visit("/admin/", "admin", ("Berth administration", "Policy, people and audit")),
    Visit("/admin/axes/accessattempt/", "admin", "Access attempts"),
]


def password(username: str) -> str:
    return f"{username}-password"  # what tests.factories.user gives everyone


@pytest.fixture
def org(transactional_db: Any, queue_class_templates: None, settings: Any) -> dict[str, Any]:
    """Users in every role (tests.factories.role_users) and a little policy, so the
    home page's counts are not all zero."""
    settings.BERTH_RECONCILE_ON_CHANGE = False
    people = factories.role_users()
    factories.topology("gpu-racks")
    factories.flavor("h100")
    factories.cohort("shared")
    services.priority_classes.create(actor=None, data={"name": "train-low", "value": 1000})
    factories.cluster_queue(
        "alpha",
        team="alpha",
        cohort="shared",
        queue_class="training-large",
        resource_groups=factories.gpu_groups(nominal="16"),
    )
    services.teams.update(
        actor=None, obj=Team.objects.get(slug="alpha"), data={"namespaces": ["alpha"]}
    )
    now = timezone.now().replace(microsecond=0)
    CapacitySnapshot.objects.create(
        at=now, flavor="h100", resource=GPU, allocatable=32, largest_node=8, nodes=4
    )
    QueueSnapshot.objects.create(
        at=now, cluster_queue="alpha", flavor="h100", resource=GPU, nominal=16, usage=12
    )
    job_services.submit(people["member_a"], WARMUP)
    return people


def sign_in_as(page: Page, role: str) -> None:
    username = ROLES[role]
    if username is not None:
        login(page, username, password(username))
        expect(page.get_by_role("button", name="Sign out")).to_be_visible()


def assert_only_local_requests(guard: Guard, base_url: str) -> None:
    assert guard.requests, "the page made no request at all"
    assert all(url.startswith(f"{base_url}/") for url in guard.requests), guard.requests


@pytest.mark.parametrize("visit", PAGES, ids=lambda v: f"{v.path}-as-{v.role}")
def test_page(page: Page, guard: Guard, base_url: str, org: dict[str, Any], visit: Visit) -> None:
    sign_in_as(page, visit.role)
    response = page.goto(visit.path)
    assert response is not None and response.ok, f"{visit.path}: {response and response.status}"
    for text in visit.texts:
        expect(page.get_by_text(text).first).to_be_visible()
    username = ROLES[visit.role]
    if username is not None:  # the header names who is signed in
        expect(page.locator("header")).to_contain_text(username)
    screenshot(page, visit.name)
    assert_only_local_requests(guard, base_url)


@pytest.mark.parametrize("visit", LIBRARY_PAGES, ids=lambda v: f"{v.path}-as-{v.role}")
def test_library_page(
    page: Page, guard: Guard, base_url: str, org: dict[str, Any], visit: Visit
) -> None:
    sign_in_as(page, visit.role)
    response = page.goto(visit.path)
    assert response is not None and response.ok, f"{visit.path}: {response and response.status}"
    for text in visit.texts:
        expect(page.get_by_text(text).first).to_be_visible()
    screenshot(page, visit.name)
    assert_only_local_requests(guard, base_url)


GPU = "nvidia.com/gpu"
WARMUP = {
    "name": "warmup",
    "team": "alpha",
    "image": "registry.example.com/trainer:1",
    "queue": "alpha",
    "nodes": 1,
    "gpus_per_node": 8,
    "checkpoint_uri": "s3://bucket/warmup",
    "command": ["python", "train.py"],
}


def figure(page: Page, name: str) -> int:
    return int(page.locator(f'[data-figure-name="{name}"]').inner_text().strip())


@pytest.mark.parametrize("role", ["admin", "member", "approver"])
def test_the_overview_numbers_are_the_databases_and_update_live(
    page: Page, org: dict[str, Any], role: str, guard: Guard, base_url: str
) -> None:
    sign_in_as(page, role)
    page.goto("/")
    assert figure(page, "gpus") == sum(
        CapacitySnapshot.objects.values_list("allocatable", flat=True)
    )
    assert figure(page, "allocated") == sum(QueueSnapshot.objects.values_list("usage", flat=True))
    expect(page.locator("#chart-capacity-now .main-svg").first).to_be_visible()  # plotly drew it
    # A new snapshot reaches the open page within a few seconds, without a reload.
    later = timezone.now().replace(microsecond=0) + timedelta(seconds=1)
    QueueSnapshot.objects.create(
        at=later, cluster_queue="alpha", flavor="h100", resource=GPU, nominal=16, usage=15
    )
    expect(page.locator('[data-figure-name="allocated"]')).to_have_text("15", timeout=6000)
    expect(page.locator("#last-updated")).to_contain_text("updated")
    assert_only_local_requests(guard, base_url)


def test_the_queue_list_shows_what_the_database_says(
    page: Page, org: dict[str, Any], guard: Guard, base_url: str
) -> None:
    sign_in_as(page, "member")
    page.goto("/queues/")
    row = page.locator('tr[data-queue="alpha"]')
    expect(row.locator('[data-col="usage"]')).to_have_text("12")
    assert_only_local_requests(guard, base_url)


def test_a_job_submitted_from_the_team_page_appears_in_the_list(
    page: Page, org: dict[str, Any], guard: Guard, base_url: str
) -> None:
    sign_in_as(page, "member")
    page.goto("/teams/alpha/")
    form = page.locator("#submit-form")
    form.locator('input[name="name"]').fill("from-the-browser")
    form.locator('input[name="image"]').fill("registry.example.com/trainer:2")
    form.locator('input[name="command"]').fill("python train.py --epochs 3")
    form.locator('input[name="nodes"]').fill("1")
    form.locator('input[name="checkpoint_uri"]').fill("s3://bucket/from-the-browser")
    form.get_by_role("button", name="Preview").click()
    expect(page.locator("#preview")).to_contain_text("Lands in")
    screenshot(page, "team-preview")
    page.locator("#submit-form").get_by_role("button", name="Submit").click()
    expect(page.locator("h1")).to_contain_text("Job from-the-browser")
    stored = JobRequest.objects.get(name="from-the-browser")
    assert stored.command == ["python", "train.py", "--epochs", "3"]
    page.goto("/jobs/")
    expect(page.locator('tr[data-job="from-the-browser"]')).to_be_visible()
    screenshot(page, "jobs-after-submit")
    assert_only_local_requests(guard, base_url)


def test_wrong_password_shows_the_error_and_stays_on_login(
    page: Page, org: dict[str, Any], base_url: str
) -> None:
    login(page, "member-a", "not-the-password")
    assert re.fullmatch(rf"{re.escape(base_url)}/login/(\?.*)?", page.url), page.url
    expect(page.locator(".error")).to_have_text("Wrong username or password.")
    expect(page.get_by_role("button", name="Sign out")).to_have_count(0)
    screenshot(page, "login-wrong-password")
    # Still signed out: the home page sends us back to the form.
    page.goto("/")
    assert page.url.startswith(f"{base_url}/login/"), page.url


def test_sign_in_lands_on_home_and_sign_out_signs_out(
    page: Page, org: dict[str, Any], base_url: str
) -> None:
    login(page, "approver-a", password("approver-a"))
    assert page.url == f"{base_url}/", page.url
    expect(page.locator("header")).to_contain_text("approver-a")
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_load_state()
    assert page.url.startswith(f"{base_url}/login/"), page.url
    expect(page.get_by_role("button", name="Sign out")).to_have_count(0)
    screenshot(page, "signed-out")
    page.goto("/")
    assert page.url == f"{base_url}/login/?next=/", page.url


# --------------------------------------------------------------------- the guard itself

OUTSIDE_IMAGE = "http://203.0.113.1/x.png"  # TEST-NET-3; aborted in the browser anyway


def test_guard_aborts_and_records_an_outside_request(page: Page, guard: Guard) -> None:
    failed: list[tuple[str, str | None]] = []
    answered: list[str] = []
    page.on("requestfailed", lambda request: failed.append((request.url, request.failure)))
    page.on("response", lambda response: answered.append(response.url))
    page.set_content(f'<h1>Guarded</h1><img src="{OUTSIDE_IMAGE}" alt="outside">')

    assert guard.outside == [OUTSIDE_IMAGE]
    assert [(url, (why or "").split(".")[0]) for url, why in failed] == [
        (OUTSIDE_IMAGE, "net::ERR_BLOCKED_BY_CLIENT")
    ]
    assert OUTSIDE_IMAGE not in answered  # aborted before it went anywhere
    assert any(OUTSIDE_IMAGE in line for line in guard.problems())  # so teardown would fail
    guard.forgive()
    assert guard.problems() == []


def test_guard_blocks_navigating_outside(page: Page, guard: Guard) -> None:
    with pytest.raises(PlaywrightError, match="ERR_BLOCKED_BY_CLIENT"):
        page.goto("http://203.0.113.1/")
    assert guard.outside == ["http://203.0.113.1/"]
    guard.forgive()


def test_guard_records_console_and_page_errors(page: Page, guard: Guard) -> None:
    with page.expect_event("pageerror"):
        page.set_content(
            "<script>console.error('boom'); setTimeout(() => { throw new Error('kaboom'); });"
            "</script>"
        )
    problems = guard.problems()
    assert any("console error: boom" in line for line in problems), problems
    assert any("uncaught page error" in line and "kaboom" in line for line in problems), problems
    guard.forgive()


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8000/", True),
        ("http://localhost:41234/static/x.css", True),
        ("ws://localhost:41234/events", True),
        ("data:image/png;base64,AAAA", True),
        ("about:blank", True),
        ("blob:http://localhost:8000/5b1f", True),
        ("http://203.0.113.1/x.png", False),
        ("https://localhost.example.com/", False),
        ("http://10.0.0.1/", False),
        ("blob:https://cdn.example.com/5b1f", False),
    ],
)
def test_what_counts_as_local(url: str, local: bool) -> None:
    assert is_local(url) is local


def test_the_job_page_shows_its_timeline_and_manifest(
    page: Page, org: dict[str, Any], guard: Guard, base_url: str
) -> None:
    warmup = JobRequest.objects.get(name="warmup")
    sign_in_as(page, "member")
    page.goto(f"/jobs/{warmup.pk}/")
    expect(page.locator("h1")).to_contain_text("Job warmup")
    expect(page.get_by_text("Rendered manifest")).to_be_visible()
    expect(page.locator("#job-timeline")).to_contain_text("submitted")
    screenshot(page, "job-member")
    assert_only_local_requests(guard, base_url)
