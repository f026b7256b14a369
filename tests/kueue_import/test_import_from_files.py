"""Reading a Kueue installation Berth did not make (``queues.kueue.adopt``,
pure) and ``manage.py import_kueue --from-files``: the hand-written
installation of tests/kueue_import/installation.yaml as a GitOps repository
holds it."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from queues.kueue.adopt import guess_class, read_kueue
from queues.kueue.plan import make_plan
from queues.kueue.render import PolicyBundle, render
from queues.kueue.served import as_served, owner_of
from queues.models import AdoptedObject, ClusterQueue, PolicyChange

INSTALLATION = Path(__file__).with_name("installation.yaml")
CLASSES = ["interactive-dev", "training-large", "eval-batch", "urgent-release"]


def objects() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(INSTALLATION.read_text()) if doc]


def read(**options: Any) -> Any:
    return read_kueue(
        objects(),
        team_label=options.pop("team_label", "org.example/team"),
        known_classes=CLASSES,
        approval_classes=["urgent-release"],
        **options,
    )


def test_the_installation_has_more_than_twenty_objects() -> None:
    assert len(objects()) >= 20


def test_teams_come_from_the_namespace_label_or_else_the_namespaces() -> None:
    by_label = {t["slug"]: t["namespaces"] for t in read().teams}
    assert by_label == {
        "nlp": ["nlp"],
        "research": ["research-a", "research-b"],
        "vision": ["vision"],
    }
    by_namespace = {t["slug"] for t in read(team_label=None).teams}
    assert by_namespace == {"nlp", "research-a", "research-b", "vision"}


def test_a_queue_is_its_teams_when_its_local_queues_are_in_one_teams_namespaces() -> None:
    teams = {q["name"]: q["team"] for q in read().cluster_queues}
    assert teams["research-training"] == "research"  # two namespaces, one team
    assert teams["shared-preemptible"] is None  # no LocalQueue: shared
    split = {q["name"]: q["team"] for q in read(team_label=None).cluster_queues}
    assert split["research-training"] is None  # research-a and research-b are two teams


def test_hierarchical_cohorts_come_parents_first_with_their_weights() -> None:
    cohorts = read().cohorts
    assert [c["name"] for c in cohorts].index("org") < [c["name"] for c in cohorts].index(
        "research-pool"
    )
    weights = {c["name"]: (c["parent"], c["fair_sharing_weight"]) for c in cohorts}
    assert weights == {
        "org": (None, "1"),
        "research-pool": ("org", "2"),
        "applied-pool": ("org", "0.5"),
    }
    org = next(c for c in cohorts if c["name"] == "org")
    assert org["resource_groups"][0]["flavors"][0]["resources"][0]["nominal_quota"] == "8"


def test_every_field_berth_cannot_represent_is_named_with_its_object() -> None:
    dropped = {(d.kind, d.name, d.field) for d in read().dropped}
    assert dropped == {
        ("ClusterQueue", "nlp-eval-batch", "spec.admissionChecksStrategy.admissionChecks[0]"),
        ("LocalQueue", "nlp/nlp-eval-batch", "spec.fairSharing"),
    }
    unknown = objects()
    queue = next(o for o in unknown if o["metadata"]["name"] == "research-training")
    queue["spec"]["concurrentAdmissionPolicy"] = {"migration": {}}
    found = read_kueue(unknown, known_classes=CLASSES).dropped
    assert any(
        (d.name, d.field) == ("research-training", "spec.concurrentAdmissionPolicy") for d in found
    )


def test_other_admission_checks_are_left_alone_and_berths_is_adopted() -> None:
    policy = read()
    assert [(s.kind, s.name) for s in policy.skipped] == [("AdmissionCheck", "capacity-check")]
    assert ("AdmissionCheck", "", "berth-approval") in policy.adopted
    assert ("AdmissionCheck", "", "capacity-check") not in policy.adopted


def test_queue_classes_are_guessed_from_names_but_never_change_the_approval_gate() -> None:
    guesses = {g.queue: g.queue_class for g in read().guesses}
    assert guesses == {
        "research-training": "training-large",
        "research-interactive": "interactive-dev",
        "nlp-eval-batch": "eval-batch",
        "vision-urgent": "urgent-release",
        "shared-preemptible": None,
    }
    # Named urgent, but not gated: no class that would add Berth's approval.
    assert guess_class("urgent-fixes", CLASSES) == ("urgent-release", "its name has 'urgent'")
    ungated = objects()
    queue = next(o for o in ungated if o["metadata"]["name"] == "vision-urgent")
    del queue["spec"]["admissionChecksStrategy"]
    [guess] = [
        g
        for g in read_kueue(
            ungated, known_classes=CLASSES, approval_classes=["urgent-release"]
        ).guesses
        if g.queue == "vision-urgent"
    ]
    assert guess.queue_class is None and "not gated by Berth's approval check" in guess.why
    chosen = {g.queue: g.queue_class for g in read(classes={"research-training": ""}).guesses}
    assert chosen["research-training"] is None


def test_berths_own_objects_and_skipped_ones_are_not_imported() -> None:
    own = objects()
    own[4]["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "berth"}
    policy = read_kueue(own, skip=["ResourceFlavor/a100"], known_classes=CLASSES)
    skipped = {(s.kind, s.name, s.why) for s in policy.skipped}
    assert ("Topology", "gpu-racks", "already Berth's (managed-by berth)") in skipped
    assert ("ResourceFlavor", "a100", "left out (--skip)") in skipped
    assert "a100" not in {f["name"] for f in policy.flavors}


def test_files_are_planned_against_what_an_api_server_would_hold() -> None:
    """A file leaves Kueue's defaults out; the plan fills them as the server does,
    so a queue Berth renders as the file meant is not a change."""
    served = as_served({"kind": "ClusterQueue", "metadata": {"name": "q"}, "spec": {}})
    assert served["spec"]["queueingStrategy"] == "BestEffortFIFO"
    assert served["spec"]["preemption"]["borrowWithinCohort"] == {"policy": "Never"}
    assert served["spec"]["flavorFungibility"]["whenCanPreempt"] == "TryNextFlavor"


def test_a_takeover_shares_equal_values_in_the_clusters_notation_and_takes_the_rest() -> None:
    policy = read()
    bundle = PolicyBundle(
        teams=policy.teams,
        flavors=policy.flavors,
        cohorts=[{**c, "resource_groups": c["resource_groups"]} for c in policy.cohorts],
    )
    desired = [o for o in render(bundle) if o["metadata"]["name"] == "org"]
    actual = [as_served(o) for o in objects() if o["metadata"]["name"] == "org"]
    actual[0]["metadata"]["managedFields"] = [
        {"manager": "argocd-controller", "fieldsV1": {"f:spec": {"f:resourceGroups": {}}}}
    ]
    [change] = make_plan(desired, actual, adopt=[("Cohort", "", "org")]).changes
    quota = change.desired["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert quota["nominalQuota"] == 8  # the cluster's 8, not Berth's "8": equal for apply
    assert change.taken == [] and change.force is False
    assert owner_of(actual[0], "spec.resourceGroups[0].flavors") == ["argocd-controller"]
    assert make_plan(desired, actual).changes[0].action == "conflict"  # not adopted: refused


@pytest.mark.django_db
def test_the_command_plans_from_files_and_stores_nothing() -> None:
    before = PolicyChange.objects.count()
    out = StringIO()
    call_command(
        "import_kueue",
        "--from-files",
        str(INSTALLATION),
        "--team-label",
        "org.example/team",
        stdout=out,
    )
    said = out.getvalue()
    assert "Berth cannot represent (2)" in said and "Nothing was stored" in said
    assert "on a cluster holding these files" in said
    assert not ClusterQueue.objects.exists() and PolicyChange.objects.count() == before


@pytest.mark.django_db
def test_the_command_applies_from_files_and_leaves_the_takeover_to_reconcile() -> None:
    out = StringIO()
    call_command(
        "import_kueue",
        "--from-files",
        str(INSTALLATION.parent),
        "--team-label",
        "org.example/team",
        "--apply",
        stdout=out,
    )
    assert "The next reconcile of the configured cluster takes the objects over" in out.getvalue()
    assert ClusterQueue.objects.count() == 5
    assert AdoptedObject.objects.filter(kind="ClusterQueue").count() == 5
    notes = set(PolicyChange.objects.exclude(note="").values_list("note", flat=True))
    assert len(notes) == 1
    assert notes.pop().startswith(f"imported from files {INSTALLATION.parent} by ")


def test_unreadable_files_are_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [unclosed\n")
    with pytest.raises(CommandError, match=r"bad\.yaml: not valid YAML"):
        call_command("import_kueue", "--from-files", str(bad))
    with pytest.raises(CommandError, match=r"nowhere\.yaml: no such file or folder"):
        call_command("import_kueue", "--from-files", str(tmp_path / "nowhere.yaml"))
    with pytest.raises(CommandError, match="write QUEUE=CLASS"):
        call_command("import_kueue", "--from-files", str(INSTALLATION), "--class", "oops")
