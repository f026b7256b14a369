"""What the policy editor tests (``test_policy_*.py``) share: ``form_data``,
which reads the inputs, selects and textareas of a rendered form the way a
browser would submit them, so a test changes only what an admin would type;
the ``org`` and ``admin`` fixtures (role users, two flavors, a cohort and one
team queue); ``footprint``, everything Plan must leave alone; and the names of
the quota inputs of that queue's form. Test modules import the fixtures by
name, as other tests import ``tests.jobs.conftest.org``."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

import pytest
from django.test import Client

from queues.models import (
    ClusterQueue,
    Cohort,
    LocalQueue,
    PolicyChange,
    Quota,
    ReconcileRun,
    ResourceFlavor,
)
from tests.factories import cluster_queue, cohort, flavor, gpu_groups, role_users

QUEUE_URL = "/policy/cluster-queue/research/"
NOMINAL = "rg-0-f-0-r-0-nominal_quota"
LENDING = "rg-0-f-0-r-0-lending_limit"
NOMINAL_PATH = "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"


class FormReader(HTMLParser):
    """The fields a browser would submit from one form (no button pressed)."""

    def __init__(self, form_id: str) -> None:
        super().__init__()
        self.form_id = form_id
        self.inside = False
        self.fields: dict[str, str] = {}
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.inside = a.get("id") == self.form_id
        if not self.inside:
            return
        name = a.get("name", "")
        if tag == "input" and name:
            kind = a.get("type", "text")
            if kind in ("submit", "button"):
                return
            if kind in ("checkbox", "radio") and "checked" not in a:
                return
            self.fields[name] = a.get("value", "")
        elif tag == "select" and name:
            self._select = name
        elif tag == "option" and self._select is not None:
            if self._select not in self.fields or "selected" in a:
                self.fields[self._select] = a.get("value", "")
        elif tag == "textarea" and name and "readonly" not in a:
            self._textarea = name
            self.fields[name] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            # The HTML parser gives the text after the newline a textarea may open with.
            self.fields[self._textarea] += (
                data.lstrip("\n") if not self.fields[self._textarea] else data
            )


def form_data(html: str, form_id: str = "policy-form") -> dict[str, str]:
    reader = FormReader(form_id)
    reader.feed(html)
    assert reader.fields, f"no form #{form_id} on the page"
    return reader.fields


def text(response: Any) -> str:
    return response.content.decode()


@pytest.fixture
def org(db: Any, queue_class_templates: None, settings: Any) -> dict[str, Any]:
    """Role users (tests.factories.role_users), two flavors, a cohort and one
    team queue with 8 GPUs of which it lends at most 4."""
    settings.BERTH_RECONCILE_ON_CHANGE = False
    people = role_users()
    flavor("h100")
    flavor("h100-spot", capacity_type="spot")
    cohort("shared")
    cluster_queue(
        "research",
        team="alpha",
        cohort="shared",
        queue_class="training-large",
        resource_groups=gpu_groups("h100", "8", lending_limit="4"),
    )
    return people


@pytest.fixture
def admin(org: dict[str, Any]) -> Client:
    client = Client()
    client.force_login(org["admin"])
    return client


def footprint() -> dict[str, Any]:
    """Everything Plan must leave alone."""
    return {
        "changes": PolicyChange.objects.count(),
        "runs": ReconcileRun.objects.count(),
        "quotas": sorted(
            Quota.objects.values_list(
                "cluster_queue__name",
                "flavor__name",
                "resource",
                "nominal_quota",
                "borrowing_limit",
                "lending_limit",
            ),
            key=repr,
        ),
        "local_queues": sorted(LocalQueue.objects.values_list("namespace__name", "name")),
        "queues": sorted(ClusterQueue.objects.values_list("name", "revision")),
        "flavors": sorted(ResourceFlavor.objects.values_list("name", "revision")),
        "cohorts": sorted(Cohort.objects.values_list("name", "revision")),
    }


def queue_form(client: Client, **changes: str) -> dict[str, str]:
    data = form_data(text(client.get(QUEUE_URL)))
    data.update(changes)
    return data


def nominal() -> int:
    return Quota.objects.get(cluster_queue__name="research", flavor__name="h100").nominal_quota
