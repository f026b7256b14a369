"""The reconcile plan's takeover of an imported object (``queues.kueue.plan``,
pure): what Berth applies, whether it forces, and which fields it takes from
their manager."""

from __future__ import annotations

from typing import Any

from queues.kueue.plan import CONFLICT, UPDATE, differences, make_plan
from queues.kueue.render import render_cluster_queue

QUEUE: dict[str, Any] = {
    "name": "research",
    "team": "research",
    "cohort": "org",
    "queueing_strategy": "StrictFIFO",
    "within_cluster_queue": "LowerPriority",
    "reclaim_within_cohort": "Any",
    "borrow_within_cohort_policy": "Never",
    "when_can_borrow": "MayStopSearch",
    "when_can_preempt": "TryNextFlavor",
    "fair_sharing_weight": "2",
    "resource_groups": [
        {
            "covered_resources": ["nvidia.com/gpu"],
            "flavors": [
                {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominal_quota": "8"}]}
            ],
        }
    ],
}
KEY = ("ClusterQueue", "", "research")


def desired() -> dict[str, Any]:
    return render_cluster_queue(QUEUE, requires_approval=False)


def on_cluster(**spec: Any) -> dict[str, Any]:
    """The queue as GitOps wrote it: Berth's spec with numbers as numbers,
    its own selector, no Berth labels; ``spec`` overrides."""
    body = {k: v for k, v in desired()["spec"].items()}
    body["fairSharing"] = {"weight": 2}
    body["resourceGroups"] = [
        {
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [
                {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}
            ],
        }
    ]
    body["namespaceSelector"] = {"matchLabels": {"berth.dev/team": "research"}}
    body.update(spec)
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {
            "name": "research",
            "labels": {"team.example/owner": "research"},
            "managedFields": [{"manager": "argocd-controller", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": body,
    }


def test_an_object_not_adopted_is_still_refused_as_someone_elses() -> None:
    [change] = make_plan([desired()], [on_cluster()]).changes
    assert change.action == CONFLICT


def test_equal_values_are_applied_in_the_clusters_notation_without_force() -> None:
    [change] = make_plan([desired()], [on_cluster()], adopt=[KEY]).changes
    assert change.action == UPDATE and change.force is False and change.taken == []
    assert change.desired is not None
    spec = change.desired["spec"]
    assert spec["fairSharing"]["weight"] == 2  # the cluster's number, not Berth's "2"
    assert spec["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == 8
    assert spec["queueingStrategy"] == "StrictFIFO"
    # Berth's labels, as rendered (the hash of Berth's own rendering).
    assert change.desired["metadata"] == desired()["metadata"]
    assert change.fields == [
        "metadata.labels.app.kubernetes.io/managed-by",
        "metadata.labels.berth.dev/policy-hash",
        "metadata.labels.berth.dev/team",
    ]
    assert change.note == "taken over by Berth (imported)"
    assert change.as_dict()["action"] == "update" and "taken_over" not in change.as_dict()


def test_a_value_berth_changes_is_taken_with_force() -> None:
    [change] = make_plan(
        [desired()], [on_cluster(queueingStrategy="BestEffortFIFO")], adopt=[KEY]
    ).changes
    assert change.force is True and change.taken == ["spec.queueingStrategy"]
    assert change.as_dict()["taken_over"] == ["spec.queueingStrategy"]
    assert change.desired is not None and change.desired["spec"]["queueingStrategy"] == "StrictFIFO"


def test_a_field_the_object_left_out_is_added_without_force() -> None:
    cluster = on_cluster()
    del cluster["spec"]["stopPolicy"]
    [change] = make_plan([desired()], [cluster], adopt=[KEY]).changes
    assert "spec.stopPolicy" in change.fields
    assert change.force is False and change.taken == []


def test_a_selector_is_taken_whole_however_little_of_it_changes() -> None:
    """A label selector is an atomic map to server-side apply."""
    cluster = on_cluster(namespaceSelector={"matchLabels": {"org.example/team": "research"}})
    [change] = make_plan([desired()], [cluster], adopt=[KEY]).changes
    assert change.taken == ["spec.namespaceSelector"]
    assert change.fields.count("spec.namespaceSelector") == 1
    assert not any(f.startswith("spec.namespaceSelector.") for f in change.fields)
    assert change.force is True
    # An empty selector (every namespace) is a value too; a missing one is not.
    [empty] = make_plan([desired()], [on_cluster(namespaceSelector={})], adopt=[KEY]).changes
    assert empty.taken == ["spec.namespaceSelector"]
    cluster = on_cluster()
    del cluster["spec"]["namespaceSelector"]
    [missing] = make_plan([desired()], [cluster], adopt=[KEY]).changes
    assert "spec.namespaceSelector" in missing.fields and missing.taken == []


def test_a_label_berth_sets_held_with_another_value_is_taken() -> None:
    """Berth's team label says another team: labels are granular to server-side
    apply, so that one key is taken (with force), not the whole map."""
    cluster = on_cluster()
    cluster["metadata"]["labels"]["berth.dev/team"] = "vision"
    [change] = make_plan([desired()], [cluster], adopt=[KEY]).changes
    assert change.taken == ["metadata.labels.berth.dev/team"] and change.force is True
    assert "metadata.labels.app.kubernetes.io/managed-by" in change.fields


def test_a_value_inside_a_keyed_list_is_taken_by_its_index() -> None:
    """admissionChecks is a keyed list (not atomic): the entry's field is taken."""
    wanted = render_cluster_queue(QUEUE, requires_approval=True)
    cluster = on_cluster(admissionChecksStrategy={"admissionChecks": [{"name": "other-check"}]})
    [change] = make_plan([wanted], [cluster], adopt=[KEY]).changes
    assert change.taken == ["spec.admissionChecksStrategy.admissionChecks[0].name"]
    assert change.force is True


def test_the_change_names_its_object_and_keeps_what_the_cluster_had() -> None:
    """The cluster's copy rides along: its resourceVersion guards the apply and
    its managers are what the plan says a field is taken from."""
    cluster = on_cluster(queueingStrategy="BestEffortFIFO")
    [change] = make_plan([desired()], [cluster], adopt=[KEY]).changes
    assert (change.kind, change.namespace, change.name) == KEY
    assert change.actual == cluster
    assert change.desired is not None and set(change.desired) == set(desired())


def test_changed_only_differences_leave_out_what_the_cluster_lacks() -> None:
    want = {"a": {"b": 1, "c": 2}, "l": [1, 2], "m": [1], "s": "x"}
    have = {"a": {"b": 9}, "l": [1, 3], "m": [1, 2]}
    assert differences(want, have) == ["a.b", "a.c", "l[1]", "m", "s"]
    assert differences(want, have, changed_only=True) == ["a.b", "l[1]", "m"]
    assert differences(want, None, changed_only=True) == []
    # Inside a list's entries too: a key the entry lacks is not a changed value.
    entries = ({"l": [{"a": 1, "b": 2}]}, {"l": [{"a": 9}]})
    assert differences(*entries) == ["l[0].a", "l[0].b"]
    assert differences(*entries, changed_only=True) == ["l[0].a"]


def test_a_list_of_another_length_is_berths_and_taken() -> None:
    groups = on_cluster()["spec"]["resourceGroups"] * 2
    [change] = make_plan([desired()], [on_cluster(resourceGroups=groups)], adopt=[KEY]).changes
    assert change.taken == ["spec.resourceGroups"] and change.force is True
    assert change.desired is not None
    quota = change.desired["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert quota["nominalQuota"] == "8"  # Berth's: nothing of the cluster's to keep


def test_a_value_inside_an_atomic_list_takes_the_whole_list() -> None:
    """Kueue's resourceGroups is an atomic list: one quota changed, and the
    whole list changes manager."""
    cluster = on_cluster()
    cluster["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 4
    [change] = make_plan([desired()], [cluster], adopt=[KEY]).changes
    assert change.taken == ["spec.resourceGroups"] and change.force is True
    assert change.desired is not None
    assert (
        change.desired["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]
        == "8"
    )


def test_a_taken_over_object_is_then_unchanged() -> None:
    """What the takeover applied, read back, is what reconcile wants: no write."""
    [change] = make_plan([desired()], [on_cluster()], adopt=[KEY]).changes
    assert change.desired is not None
    applied = {**change.desired, "metadata": {**change.desired["metadata"]}}
    [after] = make_plan([desired()], [applied], adopt=[KEY]).changes
    assert after.action == "unchanged"
