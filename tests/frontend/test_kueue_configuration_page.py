"""The Kueue configuration page at /policy/kueue-configuration/: reached from
the policy editor's navigation, settings shown in words (never a bare 300),
Plan writes nothing, Apply saves through the API's rules with history, errors
next to their fields, a stale form refused, and on a real cluster the page and
the plan say it is a manual step. Also the ClusterQueue form's admission mode.
Forms are read and posted as a browser would (``policy_editor_support``)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from accounts.models import AccessDenial
from queues import services
from queues.models import ClusterQueue, KueueConfiguration, PolicyChange
from tests.frontend.policy_editor_support import (
    QUEUE_URL,
    admin,
    footprint,
    form_data,
    org,
    text,
)

__all__ = ["admin", "org"]  # fixtures, imported for pytest to find

URL = "/policy/kueue-configuration/"
FORM = "kueue-configuration-form"


def config_form(client: Client, **changes: str) -> dict[str, str]:
    data = form_data(text(client.get(URL)), FORM)
    data.update(changes)
    return data


def turned_on(client: Client, *switches: str, **changes: str) -> dict[str, str]:
    data = config_form(client, **changes)
    for switch in switches:
        data[switch] = "1"  # the checkbox, ticked
    return data


def test_the_policy_page_links_to_it_and_summarises_it_in_words(admin: Client) -> None:
    page = text(admin.get("/policy/"))
    assert 'id="nav-kueue-configuration"' in page
    assert f'href="{URL}"' in page
    assert "Never saved: Kueue's defaults apply" in page
    services.kueue_configuration.update(
        actor=None,
        data={
            "admissionFairSharing": {"usageHalfLifeTime": "168h"},
            "waitForPodsReady": {"requeuingStrategy": {"backoffBaseSeconds": 300}},
        },
    )
    page = text(admin.get("/policy/"))
    assert "usage half-life 7 d (168h)" in page
    assert "timeout 5 min (5m)" in page
    assert (
        "backoff from 5 min" in page
        and "300" not in page.split('id="kueue-configuration"')[1].split("</div>")[0]
    )
    # The editor's other pages carry the same navigation.
    assert 'id="nav-kueue-configuration"' in text(admin.get(QUEUE_URL))


def test_the_page_explains_each_setting_and_shows_readable_values(admin: Client) -> None:
    response = admin.get(URL)
    assert response.status_code == 200
    page = text(response)
    for expected in (
        "Fair sharing",
        "Admission fair sharing",
        "Wait for pods ready",
        "a team that ran little goes first",
        "so a stuck job does not hold GPUs",
        "now: 5 min (5m)",
        "now: 1 min",  # the 60 s backoff base
        "now: 1 h",  # the 3600 s backoff maximum
        "Never saved",
    ):
        assert expected in page, expected
    assert 'id="applied-by-berth"' in page  # the simulated cluster applies it
    data = form_data(page, FORM)
    assert data["revision"] == "0"
    assert "fairSharing.enable" not in data  # unticked
    assert data["waitForPodsReady.timeout"] == "5m"


def test_apply_saves_through_the_api_rules_and_records_history(admin: Client) -> None:
    data = turned_on(
        admin,
        "fairSharing.enable",
        "admissionFairSharing.enable",
        "waitForPodsReady.enable",
        **{
            "admissionFairSharing.usageHalfLifeTime": "72h",
            "waitForPodsReady.timeout": "10m",
            "waitForPodsReady.requeuingStrategy.timestamp": "Creation",
            "waitForPodsReady.requeuingStrategy.backoffLimitCount": "4",
            "fairSharing.preemptionStrategies": "LessThanInitialShare",
            "action": "apply",
        },
    )
    response = admin.post(URL, data)
    assert response.status_code == 302, text(response)
    entry = PolicyChange.objects.get(kind="kueue-configuration")
    assert response["Location"] == f"{URL}?applied={entry.pk}"
    stored = KueueConfiguration.objects.get()
    assert stored.fair_sharing_enable and stored.admission_fair_sharing_enable
    assert stored.fair_sharing_preemption_strategies == "LessThanInitialShare"
    assert stored.usage_half_life_time_ns == 72 * 3600 * 10**9
    assert stored.requeuing_timestamp == "Creation" and stored.backoff_limit_count == 4
    page = text(admin.get(response["Location"]))
    assert 'id="applied"' in page and "revision 1" in page
    assert "now: 3 d (72h)" in page
    assert f'<a href="{URL}">kueue-manager-config</a>' in page  # the history links here


def test_plan_shows_the_configmap_it_would_create_and_saves_nothing(admin: Client) -> None:
    data = turned_on(admin, "waitForPodsReady.enable", action="plan")
    before = footprint()
    response = admin.post(URL, data)
    assert response.status_code == 200
    plan = response.context["plan"]
    assert [(c.action, c.kind, c.name) for c in plan.changes] == [
        ("create", "ConfigMap", "kueue-manager-config")
    ]
    assert "waitForPodsReady:" in plan.changes[0].manifest
    assert footprint() == before
    assert not KueueConfiguration.objects.exists()
    # The form comes back as typed.
    assert form_data(text(response), FORM)["waitForPodsReady.enable"] == "1"


def test_a_plan_of_a_change_reads_key_by_key(admin: Client) -> None:
    services.kueue_configuration.update(actor=None, data={"waitForPodsReady": {}})
    data = config_form(admin, **{"waitForPodsReady.timeout": "15m", "action": "plan"})
    plan = admin.post(URL, data).context["plan"]
    [change] = plan.changes
    assert change.action == "update"
    assert [(f.path, f.old, f.new) for f in change.fields] == [
        ("data.controller_manager_config.yaml.waitForPodsReady.timeout", "5m", "15m")
    ]


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [
        ("waitForPodsReady.timeout", "0s", "positive"),
        ("waitForPodsReady.timeout", "five", "duration"),
        ("waitForPodsReady.requeuingStrategy.backoffMaxSeconds", "0", "min-value"),
        ("waitForPodsReady.requeuingStrategy.backoffBaseSeconds", "a minute", "invalid"),
    ],
)
def test_errors_are_shown_next_to_their_field_and_nothing_is_saved(
    admin: Client, field: str, value: str, rule: str
) -> None:
    data = turned_on(admin, "waitForPodsReady.enable", **{field: value, "action": "apply"})
    before = footprint()
    response = admin.post(URL, data)
    assert response.status_code == 200
    page = text(response)
    assert f'data-error="{field}" data-rule="{rule}"' in page
    assert f'name="{field}" value="{value}"' in page and 'class="invalid"' in page
    assert footprint() == before and not KueueConfiguration.objects.exists()


def test_the_half_life_is_required_once_admission_fair_sharing_is_on(admin: Client) -> None:
    data = turned_on(admin, "admissionFairSharing.enable", action="apply")
    page = text(admin.post(URL, data))
    assert 'data-error="admissionFairSharing.usageHalfLifeTime" data-rule="required"' in page


def test_a_form_opened_before_someone_else_saved_is_refused(admin: Client) -> None:
    data = turned_on(admin, "fairSharing.enable", action="apply")
    services.kueue_configuration.update(actor=None, data={"waitForPodsReady": {}})
    response = admin.post(URL, data)
    assert response.status_code == 200
    assert 'id="policy-stale"' in text(response)
    assert KueueConfiguration.objects.get().fair_sharing_enable is False


def test_applying_what_is_stored_says_so(admin: Client) -> None:
    services.kueue_configuration.update(actor=None, data={})
    response = admin.post(URL, config_form(admin, action="apply"))
    assert response.status_code == 200
    assert "Nothing to apply" in text(response)
    assert PolicyChange.objects.filter(kind="kueue-configuration").count() == 1


def test_on_a_real_cluster_the_page_and_the_plan_say_it_is_a_manual_step(
    admin: Client, settings: Any
) -> None:
    settings.BERTH_CLUSTER = "kubernetes"
    services.kueue_configuration.update(actor=None, data={"fairSharing": {"enable": True}})
    page = text(admin.get(URL))
    assert 'id="manual-step"' in page and "kubectl -n kueue-system rollout restart" in page
    assert 'id="merge-yaml"' in page and "enable: true" in page
    data = config_form(admin, **{"fairSharing.enable": "", "action": "plan"})
    del data["fairSharing.enable"]  # unticked
    plan = admin.post(URL, data).context["plan"]
    [change] = plan.changes
    assert change.action == "manual"
    assert "restart kueue-controller-manager" in change.note
    assert [(f.path, f.old, f.new) for f in change.fields] == [
        ("data.controller_manager_config.yaml.fairSharing.enable", True, False)
    ]


@pytest.mark.parametrize("who", ["member_a", "approver", "global_approver"])
def test_non_admins_get_a_404_and_change_nothing(org: dict[str, Any], who: str) -> None:
    client = Client()
    client.force_login(org[who])
    denials = AccessDenial.objects.count()
    assert client.get(URL).status_code == 404
    post = {"action": "apply", "revision": "0", "fairSharing.enable": "1"}
    assert client.post(URL, post).status_code == 404
    assert not KueueConfiguration.objects.exists()
    assert AccessDenial.objects.count() == denials + 2


# --------------------------------------------------------------------------- admission mode


def test_the_cluster_queue_form_edits_its_admission_mode(admin: Client) -> None:
    data = form_data(text(admin.get(QUEUE_URL)))
    assert data["admission_mode"] == ""
    page = text(admin.get(QUEUE_URL))
    assert "UsageBasedAdmissionFairSharing: LocalQueues that used less go first" in page
    data.update({"admission_mode": "UsageBasedAdmissionFairSharing", "action": "plan"})
    plan = admin.post(QUEUE_URL, data).context["plan"]
    [change] = plan.changes
    assert [(f.path, f.new) for f in change.fields] == [
        ("spec.admissionScope", {"admissionMode": "UsageBasedAdmissionFairSharing"})
    ]
    data["action"] = "apply"
    assert admin.post(QUEUE_URL, data).status_code == 302
    assert ClusterQueue.objects.get(name="research").admission_mode == (
        "UsageBasedAdmissionFairSharing"
    )
