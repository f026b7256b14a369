"""The admin page that imports a Kueue installation from pasted or uploaded
YAML: the plan stores nothing and names what Berth drops, Import stores with
history, non-admins are refused (and logged), bad input is said and changes
nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from accounts.models import AccessDenial
from queues.models import AdoptedObject, ClusterQueue, KueueReading, PolicyChange

INSTALLATION = Path(__file__).with_name("installation.yaml")
URL = "/policy/import/"
pytestmark = pytest.mark.django_db


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_plan_shows_what_berth_would_store_and_drop_and_stores_nothing(
    users: dict[str, Any],
) -> None:
    history = PolicyChange.objects.count()
    page = signed_in(users["admin"]).post(
        URL,
        {
            "manifests": INSTALLATION.read_text(),
            "team_label": "org.example/team",
            "classes": "shared-preemptible=eval-batch",
            "action": "plan",
        },
    )
    assert page.status_code == 200
    html = page.content.decode()
    assert "Nothing was stored" in html
    assert "spec.admissionChecksStrategy.admissionChecks[0]" in html and "spec.fairSharing" in html
    assert "capacity-check" in html  # left alone
    assert "chosen (--class)" in html  # the admin's choice over the guess
    assert "create LocalQueue research-b/research-interactive" in html
    assert not ClusterQueue.objects.exists() and PolicyChange.objects.count() == history


def test_import_from_an_uploaded_file_stores_with_history(users: dict[str, Any]) -> None:
    upload = SimpleUploadedFile("kueue.yaml", INSTALLATION.read_bytes())
    page = signed_in(users["admin"]).post(
        URL, {"files": upload, "team_label": "org.example/team", "action": "apply"}
    )
    assert page.status_code == 200 and "Imported" in page.content.decode()
    assert ClusterQueue.objects.count() == 5 and AdoptedObject.objects.count() > 20
    username = users["admin"].get_username()
    assert (
        PolicyChange.objects.filter(note=f"imported from files uploaded by {username}").count()
        >= 26
    )
    # The history on the policy page says where each change came from.
    history = signed_in(users["admin"]).get("/policy/").content.decode()
    assert f'class="muted history-note">imported from files uploaded by {username}<' in history


@pytest.mark.parametrize(
    ("form", "said"),
    [
        ({"manifests": "kind: [unclosed"}, "the pasted YAML: not valid YAML"),
        ({"manifests": ""}, "there is nothing to import"),
        ({"manifests": "- a\n- b"}, "document 1 is not a Kubernetes object"),
        ({"manifests": "kind: X\nmetadata: {name: x}", "classes": "oops"}, "one QUEUE=CLASS"),
    ],
)
def test_bad_input_is_said_and_changes_nothing(
    users: dict[str, Any], form: dict[str, str], said: str
) -> None:
    history = PolicyChange.objects.count()
    page = signed_in(users["admin"]).post(URL, {**form, "action": "apply"})
    assert page.status_code == 200 and said in page.content.decode()
    assert PolicyChange.objects.count() == history


@pytest.mark.parametrize("who", ["member_a", "approver"])
def test_non_admins_get_a_404_logged_and_nothing_stored(users: dict[str, Any], who: str) -> None:
    denials = AccessDenial.objects.count()
    client = signed_in(users[who])
    assert client.get(URL).status_code == 404
    answer = client.post(URL, {"manifests": INSTALLATION.read_text(), "action": "apply"})
    assert answer.status_code == 404
    assert not ClusterQueue.objects.exists()
    assert AccessDenial.objects.count() == denials + 2


def test_while_a_reading_is_under_way_the_page_waits_and_plans_nothing(
    users: dict[str, Any],
) -> None:
    reading = KueueReading.objects.create(requested_by=users["admin"])
    client = signed_in(users["admin"])
    waiting = client.get(f"{URL}?reading={reading.pk}").content.decode()
    assert '<meta http-equiv="refresh" content="2">' in waiting
    assert "this page reloads until a worker has read it" in waiting
    answer = client.post(URL, {"reading": reading.pk, "action": "apply"}).content.decode()
    assert "the cluster is still being read" in answer
    reading.error = "the cluster could not be read: 503"
    reading.save()
    failed = client.get(f"{URL}?reading={reading.pk}").content.decode()
    assert "failed: the cluster could not be read: 503" in failed and "refresh" not in failed
    assert client.get(f"{URL}?reading=999999").status_code == 404
    assert not ClusterQueue.objects.exists()
