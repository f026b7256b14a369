"""`manage.py reconcile` (apply, --plan, --json) and `manage.py kueue_manifests`,
run through call_command against the simulated cluster; a run that fails, and
a bad option, end in a CommandError that says why."""

from __future__ import annotations

import json
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from queues import services
from queues.backends import get_backend
from queues.kueue.render import MANAGED_BY, MANAGER, to_yaml_documents
from queues.models import ClusterQueue, ReconcileRun
from queues.reconcile import desired_objects, policy_version
from tests.factories import gpu_groups
from tests.kube.apiserver import FakeApiServer
from tests.reconcile.policy_support import on_cluster, small_policy

pytestmark = pytest.mark.django_db
JSON_KEYS = {
    "status",
    "message",
    "created",
    "updated",
    "deleted",
    "drained",
    "unchanged",
    "drifted",
    "write_calls",
    "changes",
    "errors",
}


@pytest.fixture
def policy(db: Any, settings: Any) -> None:
    settings.BERTH_RECONCILE_RETRY_BASE = 0.001
    small_policy(urgent=False)


def run_command(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_reconcile_applies_and_reports_each_change(policy: None) -> None:
    wanted = len(desired_objects())
    output = run_command("reconcile")
    run = ReconcileRun.objects.get()
    assert (run.status, run.trigger, run.dry_run) == ("succeeded", "manual", False)
    assert run.created == run.write_calls == wanted
    assert run.policy_version == policy_version()
    lines = output.splitlines()
    assert lines[0] == f"simulated cluster: {wanted} change(s) applied"
    assert "  create    ClusterQueue research" in lines
    assert "  create    LocalQueue research/research" in lines
    assert lines[-1] == (
        f"{wanted} created, 0 updated, 0 deleted, 0 draining, 0 unchanged; {wanted} write call(s)"
    )
    assert on_cluster("ClusterQueue") == {"research"}
    assert on_cluster("LocalQueue") == {"research"}

    again = run_command("reconcile").splitlines()
    assert again == [
        "simulated cluster: in sync: nothing to change",
        f"0 created, 0 updated, 0 deleted, 0 draining, {wanted} unchanged; 0 write call(s)",
    ]


def test_an_update_is_reported_with_the_fields_it_changes(policy: None) -> None:
    run_command("reconcile")
    services.cluster_queues.update(
        actor=None,
        obj=ClusterQueue.objects.get(name="research"),
        data={"resource_groups": gpu_groups("h100", "16")},
    )
    output = run_command("reconcile")
    [change] = [line for line in output.splitlines() if line.startswith("  update")]
    assert change.startswith("  update    ClusterQueue research (")
    assert "nominalQuota" in change
    assert "0 created, 1 updated" in output


def test_plan_shows_the_changes_and_applies_nothing(policy: None) -> None:
    output = run_command("reconcile", "--plan")
    run = ReconcileRun.objects.get()
    assert (run.status, run.trigger, run.dry_run) == ("succeeded", "plan", True)
    assert run.write_calls == 0 and run.created == 0
    lines = output.splitlines()
    assert lines[0] == f"simulated cluster: {len(desired_objects())} change(s) planned"
    assert "  create    ResourceFlavor h100" in lines
    assert not any("write call" in line for line in lines)  # no apply summary
    assert on_cluster("ClusterQueue") == set() and on_cluster("ResourceFlavor") == set()


def test_json_output_parses_and_carries_the_counts(policy: None) -> None:
    wanted = len(desired_objects())
    applied = json.loads(run_command("reconcile", "--json"))
    assert set(applied) == JSON_KEYS
    run = ReconcileRun.objects.get()
    assert applied == {
        "status": "succeeded",
        "message": run.message,
        "created": wanted,
        "updated": 0,
        "deleted": 0,
        "drained": 0,
        "unchanged": 0,
        "drifted": 0,
        "write_calls": wanted,
        "changes": run.changes,
        "errors": [],
    }
    assert len(applied["changes"]) == wanted
    assert {c["action"] for c in applied["changes"]} == {"create"}

    services.resource_flavors.create(actor=None, data={"name": "a100"})
    planned = json.loads(run_command("reconcile", "--plan", "--json"))
    assert (planned["status"], planned["unchanged"], planned["write_calls"]) == (
        "succeeded",
        wanted,
        0,
    )
    assert [(c["action"], c["kind"], c["name"]) for c in planned["changes"]] == [
        ("create", "ResourceFlavor", "a100")
    ]
    assert "a100" not in on_cluster("ResourceFlavor")


def test_kueue_manifests_prints_every_document_with_berths_label(policy: None) -> None:
    output = run_command("kueue_manifests")
    assert output == to_yaml_documents(desired_objects())
    documents = [d for d in yaml.safe_load_all(output) if d is not None]
    assert len(documents) == len(desired_objects())
    assert {"Namespace", "ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue"} == {
        d["kind"] for d in documents
    }
    for document in documents:
        assert document["metadata"]["labels"][MANAGED_BY] == MANAGER
    # Printing is reading: nothing is recorded or applied.
    assert ReconcileRun.objects.count() == 0
    assert on_cluster("ClusterQueue") == set()


def test_kueue_manifests_of_an_empty_policy_is_empty(db: Any) -> None:
    assert desired_objects() == []
    assert run_command("kueue_manifests") == ""


def test_an_unknown_option_is_a_command_error(policy: None) -> None:
    with pytest.raises(CommandError, match="unrecognized arguments: --apply"):
        call_command("reconcile", "--apply", stdout=StringIO())
    assert ReconcileRun.objects.count() == 0


# --- a cluster without Kueue -----------------------------------------------------


def write_kubeconfig(home: Path, server: str) -> None:
    """~/.kube/config (the client reads KUBECONFIG only at import) with one
    context, ``double``."""
    (home / ".kube").mkdir()
    (home / ".kube" / "config").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "double", "cluster": {"server": server}}],
                "users": [{"name": "tester", "user": {"token": "test"}}],
                "contexts": [
                    {"name": "double", "context": {"cluster": "double", "user": "tester"}}
                ],
                "current-context": "double",
            }
        )
    )


@pytest.fixture
def kube_settings(tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """BERTH_CLUSTER=kubernetes with HOME at tmp_path (write the kubeconfig there)."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    settings.BERTH_CLUSTER = "kubernetes"
    settings.BERTH_KUBE_CONTEXT = ""
    get_backend.cache_clear()
    try:
        yield tmp_path
    finally:
        get_backend.cache_clear()
        kubernetes.client.Configuration.set_default(None)


@pytest.fixture
def cluster_without_kueue(kube_settings: Path) -> Iterator[FakeApiServer]:
    """The kubeconfig points at the API-server double, which serves no
    kueue.x-k8s.io group."""
    server = FakeApiServer(kueue=False).start()
    write_kubeconfig(kube_settings, server.url)
    try:
        yield server
    finally:
        server.stop()


def test_a_failed_run_is_a_command_error_saying_why(
    policy: None, cluster_without_kueue: FakeApiServer
) -> None:
    with pytest.raises(CommandError, match="Kueue is not installed on this cluster"):
        call_command("reconcile", stdout=StringIO())
    run = ReconcileRun.objects.get()
    assert (run.status, run.backend, run.created) == ("failed", "kubernetes", 0)
    assert cluster_without_kueue.write_calls() == []


def test_a_failed_run_still_prints_its_json(
    policy: None, cluster_without_kueue: FakeApiServer
) -> None:
    out = StringIO()
    with pytest.raises(CommandError):
        call_command("reconcile", "--plan", "--json", stdout=out)
    printed = json.loads(out.getvalue())
    assert printed["status"] == "failed"
    assert "Kueue is not installed" in printed["message"]
    assert (printed["write_calls"], printed["changes"]) == (0, [])


def test_an_unreachable_cluster_is_a_recorded_failure_and_a_command_error(
    policy: None, kube_settings: Path
) -> None:
    server = FakeApiServer().start()
    write_kubeconfig(kube_settings, server.url)
    server.stop()  # nothing listens at the kubeconfig's address any more
    with pytest.raises(CommandError, match=r"^the cluster could not be read: .*refused"):
        call_command("reconcile", stdout=StringIO())
    run = ReconcileRun.objects.get()
    assert run.status == ReconcileRun.Status.FAILED
    assert run.message.startswith("the cluster could not be read")


def test_an_unknown_kube_context_is_a_command_error(
    policy: None, kube_settings: Path, settings: Any
) -> None:
    server = FakeApiServer().start()
    write_kubeconfig(kube_settings, server.url)
    settings.BERTH_KUBE_CONTEXT = "no-such-context"
    try:
        with pytest.raises(CommandError, match="no-such-context") as raised:
            call_command("reconcile", stdout=StringIO())
    finally:
        server.stop()
    assert "BERTH_KUBE_CONTEXT" in str(raised.value)
    assert server.write_calls() == []


def test_no_kubeconfig_at_all_is_a_command_error(policy: None, kube_settings: Path) -> None:
    with pytest.raises(CommandError, match="no cluster configuration could be loaded"):
        call_command("reconcile", "--plan", stdout=StringIO())
