"""The reconcile plan on its own (``queues.kueue.plan``, no database, no
cluster): what it creates, updates, drains, keeps and deletes, and the exact
change it records for each, given what Berth wants and what the cluster has."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from queues.kueue.plan import (
    CONFLICT,
    CREATE,
    DELETE,
    DRAIN,
    KEEP,
    MANUAL,
    UNCHANGED,
    UPDATE,
    Change,
    Plan,
    differences,
    holds_workloads,
    is_managed,
    make_plan,
    satisfies,
)
from queues.kueue.render import MANAGED_BY, MANAGER, POLICY_HASH, TEAM_LABEL

V = "kueue.x-k8s.io/v1beta2"


def obj(
    kind: str,
    name: str,
    *,
    namespace: str = "",
    spec: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    policy_hash: str = "h1",
    managed: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    metadata["labels"] = {
        **({MANAGED_BY: MANAGER, POLICY_HASH: policy_hash} if managed else {}),
        **(labels or {}),
    }
    body: dict[str, Any] = {"apiVersion": V, "kind": kind, "metadata": metadata}
    if spec is not None:
        body["spec"] = spec
    return body | extra


def queue(name: str = "q", **kw: Any) -> dict[str, Any]:
    return obj("ClusterQueue", name, spec=kw.pop("spec", {"cohortName": "org"}), **kw)


def only(plan: Plan) -> Change:
    assert len(plan.changes) == 1, plan.changes
    return plan.changes[0]


# ------------------------------------------------------------------ differences


def test_differences_name_every_path_where_the_cluster_does_not_hold_berths_value() -> None:
    desired = {"spec": {"a": 1, "b": {"c": "x"}, "l": [1, {"d": 2}]}}
    actual = {"spec": {"a": 2, "b": {"c": "y"}, "l": [1, {"d": 3}], "extra": 9}}
    assert differences(desired, actual) == ["spec.a", "spec.b.c", "spec.l[1].d"]
    assert differences(desired, copy.deepcopy(desired) | {"status": {}}) == []


def test_differences_of_a_missing_or_different_shape_name_the_parent() -> None:
    assert differences({"a": 1}, None) == ["."]
    assert differences({"a": 1}, [1]) == ["."]
    assert differences({"spec": {"a": 1}}, {"spec": "x"}) == ["spec"]
    assert differences({"spec": {"l": [1, 2]}}, {"spec": {"l": [1]}}) == ["spec.l"]
    assert differences({"spec": {"l": [1]}}, {"spec": {"l": {"0": 1}}}) == ["spec.l"]
    assert differences({"spec": {"l": []}}, {"spec": {"l": []}}) == []
    assert differences([1, 2], [1, 3]) == ["[1]"]
    assert differences(1, 2) == [""]


def test_a_quantity_sent_as_a_string_may_come_back_as_a_number_but_not_the_reverse() -> None:
    assert differences({"q": "8"}, {"q": 8}) == []
    assert differences({"q": "0.5"}, {"q": 0.5}) == []
    assert differences({"q": "8"}, {"q": 9}) == ["q"]
    assert differences({"q": 8}, {"q": "8"}) == ["q"]
    assert differences({"q": "8"}, {"q": "08"}) == ["q"]


def test_satisfies_compares_labels_annotations_spec_value_and_data_only() -> None:
    desired = obj("ConfigMap", "c", namespace="kueue-system", data={"k": "v"})
    desired["metadata"]["annotations"] = {"berth.dev/description": "d"}
    actual = copy.deepcopy(desired)
    actual["apiVersion"] = "v2"
    actual["status"] = {"x": 1}
    actual["metadata"]["labels"]["other"] = "kept"
    actual["metadata"]["resourceVersion"] = "7"
    assert satisfies(desired, actual)
    for section, key, value in (
        ("data", "k", "w"),
        ("annotations", "berth.dev/description", "e"),
        ("labels", POLICY_HASH, "h2"),
    ):
        changed = copy.deepcopy(actual)
        where = changed["data"] if section == "data" else changed["metadata"][section]
        where[key] = value
        assert not satisfies(desired, changed), key
    for key in ("spec", "value"):
        want = obj("X", "x", **{key: {"a": 1}})
        assert satisfies(want, copy.deepcopy(want))
        assert not satisfies(want, want | {key: {"a": 2}}), key


def test_empty_annotations_and_no_labels_ask_nothing_of_the_cluster() -> None:
    desired: dict[str, Any] = {"kind": "X", "metadata": {"name": "x", "annotations": {}}}
    actual = {
        "kind": "X",
        "metadata": {"name": "x", "labels": {"a": "b"}, "annotations": {"c": "d"}},
    }
    assert satisfies(desired, actual)
    assert not satisfies({"kind": "X", "metadata": {"name": "x", "labels": {"a": "b"}}}, desired)


def test_is_managed_reads_berths_label_only() -> None:
    assert is_managed(queue())
    assert not is_managed(queue(managed=False))
    assert not is_managed(obj("X", "x", managed=False, labels={MANAGED_BY: "helm"}))
    assert not is_managed({"kind": "X"})
    assert not is_managed({"kind": "X", "metadata": {"name": "x"}})


@pytest.mark.parametrize("key", ["admittedWorkloads", "reservingWorkloads", "pendingWorkloads"])
def test_a_queue_with_any_workload_counted_in_its_status_holds_workloads(key: str) -> None:
    assert holds_workloads({"status": {key: 1}})
    assert not holds_workloads({"status": {key: 0}})


def test_a_queue_without_status_holds_nothing() -> None:
    assert not holds_workloads({})
    assert not holds_workloads({"status": None})
    assert not holds_workloads({"status": {"flavorsUsage": [1]}})


# ------------------------------------------------------------------ wanted objects


def test_a_missing_object_is_created_as_desired() -> None:
    want = obj("LocalQueue", "lq", namespace="team-a", spec={"clusterQueue": "q"})
    change = only(make_plan([want], []))
    assert (change.action, change.identity) == (CREATE, ("LocalQueue", "team-a", "lq"))
    assert change.desired == want and change.actual is None
    assert (change.fields, change.drift, change.note, change.force, change.recreate) == (
        [],
        False,
        "",
        True,
        False,
    )


def test_an_object_as_desired_with_the_same_hash_is_unchanged() -> None:
    want = obj("LocalQueue", "lq", namespace="team-a", spec={"clusterQueue": "q"})
    have = want | {"resourceVersion": "3"}
    change = only(make_plan([want], [have]))
    assert (change.action, change.desired, change.actual) == (UNCHANGED, want, have)
    assert change.identity == ("LocalQueue", "team-a", "lq")
    assert (change.fields, change.drift, change.note) == ([], False, "")


def test_a_new_policy_hash_alone_is_an_update_not_drift() -> None:
    change = only(make_plan([queue(policy_hash="h2")], [queue(policy_hash="h1")]))
    assert (change.action, change.fields, change.drift) == (
        UPDATE,
        [f"metadata.labels.{POLICY_HASH}"],
        False,
    )
    assert (change.recreate, change.note, change.force) == (False, "", True)


def test_a_hash_missing_on_the_cluster_is_an_update() -> None:
    have = queue()
    del have["metadata"]["labels"][POLICY_HASH]
    change = only(make_plan([queue()], [have]))
    assert (change.action, change.drift) == (UPDATE, False)


def test_a_hand_edit_under_the_same_hash_is_drift() -> None:
    want = obj("LocalQueue", "lq", namespace="team-a", spec={"clusterQueue": "q"})
    edited = obj("LocalQueue", "lq", namespace="team-a", spec={"clusterQueue": "x"})
    change = only(make_plan([want], [edited]))
    assert (change.action, change.fields, change.drift) == (UPDATE, ["spec.clusterQueue"], True)
    assert (change.identity, change.desired, change.actual) == (
        ("LocalQueue", "team-a", "lq"),
        want,
        edited,
    )


def test_a_new_hash_with_other_fields_is_an_update_not_drift() -> None:
    change = only(make_plan([queue(policy_hash="h2")], [queue(spec={"cohortName": "x"})]))
    assert change.action == UPDATE and change.drift is False
    assert change.fields == [f"metadata.labels.{POLICY_HASH}", "spec.cohortName"]


@pytest.mark.parametrize("field", ["spec.levels", "spec.levels[0]", "spec.levels[1].nodeLabel"])
def test_a_changed_topology_level_is_recreated(field: str) -> None:
    levels = [{"nodeLabel": "zone"}, {"nodeLabel": "rack"}]
    want = obj("Topology", "t", spec={"levels": levels})
    have_levels: Any = {
        "spec.levels": [{"nodeLabel": "zone"}],
        "spec.levels[0]": ["zone", {"nodeLabel": "rack"}],
        "spec.levels[1].nodeLabel": [{"nodeLabel": "zone"}, {"nodeLabel": "host"}],
    }[field]
    change = only(make_plan([want], [obj("Topology", "t", spec={"levels": have_levels})]))
    assert (change.action, change.recreate, change.fields) == (UPDATE, True, [field])
    assert change.note == "Kueue does not allow spec.levels to change: deleted and created again"


def test_other_fields_of_a_topology_and_levels_of_other_kinds_update_in_place() -> None:
    want = obj("Topology", "t", spec={"levels": [1], "levelsNote": "a"})
    change = only(
        make_plan([want], [obj("Topology", "t", spec={"levels": [1], "levelsNote": "b"})])
    )
    assert (change.action, change.recreate, change.note) == (UPDATE, False, "")
    change = only(make_plan([queue(spec={"levels": [1]})], [queue(spec={"levels": [2]})]))
    assert (change.action, change.recreate) == (UPDATE, False)


def test_someone_elses_object_under_berths_name_is_a_conflict() -> None:
    want = obj("LocalQueue", "lq", namespace="team-a", spec={"clusterQueue": "q"})
    theirs = obj("LocalQueue", "lq", namespace="team-a", managed=False)
    change = only(make_plan([want], [theirs]))
    assert (change.action, change.desired, change.actual) == (CONFLICT, want, theirs)
    assert change.identity == ("LocalQueue", "team-a", "lq")
    assert change.note == (
        "exists and is not managed by Berth; label it "
        "app.kubernetes.io/managed-by=berth to let Berth take it over"
    )


def namespace(team: str | None = None, **kw: Any) -> dict[str, Any]:
    labels = kw.pop("labels", {TEAM_LABEL: team} if team else {})
    return obj("Namespace", "team-a", labels=labels, **kw) | {"apiVersion": "v1"}


def test_someone_elses_namespace_gets_only_berths_team_label() -> None:
    want = namespace("alpha")
    theirs = namespace(managed=False, labels={"owner": "platform"})
    change = only(make_plan([want], [theirs]))
    assert change.action == UPDATE and change.identity == ("Namespace", "", "team-a")
    assert change.desired == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team-a", "labels": {TEAM_LABEL: "alpha"}},
    }
    assert change.actual == theirs
    assert (change.fields, change.drift, change.force) == (
        [f"metadata.labels.{TEAM_LABEL}"],
        False,
        False,
    )
    assert change.note == "not Berth's namespace: only its team label is Berth's"


def test_someone_elses_namespace_labelled_for_another_team_is_drift() -> None:
    change = only(
        make_plan([namespace("alpha")], [namespace(managed=False, labels={TEAM_LABEL: "beta"})])
    )
    assert (change.action, change.drift, change.force) == (UPDATE, True, False)


def test_someone_elses_namespace_already_labelled_for_the_team_is_unchanged() -> None:
    theirs = namespace(managed=False, labels={TEAM_LABEL: "alpha", "owner": "platform"})
    change = only(make_plan([namespace("alpha")], [theirs]))
    assert (change.action, change.actual) == (UNCHANGED, theirs)
    assert change.identity == ("Namespace", "", "team-a")
    assert change.desired is not None and change.desired["metadata"]["labels"] == {
        TEAM_LABEL: "alpha"
    }
    assert change.note == "not Berth's namespace: only its team label is Berth's"


def test_someone_elses_namespace_without_metadata_labels_gets_the_label() -> None:
    theirs = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    change = only(make_plan([namespace("alpha")], [theirs]))
    assert (change.action, change.drift) == (UPDATE, False)


# ------------------------------------------------------------------ manual kinds

MANUAL_NOTE = "apply it by hand"


def config_map(data: str = "v", **kw: Any) -> dict[str, Any]:
    return obj(
        "ConfigMap", "kueue-manager-config", namespace="kueue-system", data={"k": data}, **kw
    )


def test_a_manual_kind_never_created_is_a_manual_step() -> None:
    change = only(make_plan([config_map()], [], manual={"ConfigMap": MANUAL_NOTE}))
    assert (change.action, change.note, change.fields, change.actual) == (
        MANUAL,
        MANUAL_NOTE,
        [],
        None,
    )
    assert change.desired == config_map()
    assert change.identity == ("ConfigMap", "kueue-system", "kueue-manager-config")


def test_a_manual_kind_already_applied_is_unchanged() -> None:
    have = config_map(resourceVersion="1")
    change = only(make_plan([config_map()], [have], manual={"ConfigMap": MANUAL_NOTE}))
    assert change.identity == ("ConfigMap", "kueue-system", "kueue-manager-config")
    assert (change.action, change.desired, change.actual, change.note) == (
        UNCHANGED,
        config_map(),
        have,
        "",
    )


def test_a_manual_kind_that_differs_says_where() -> None:
    have = config_map("old")
    change = only(make_plan([config_map()], [have], manual={"ConfigMap": MANUAL_NOTE}))
    assert (change.action, change.fields, change.actual, change.note) == (
        MANUAL,
        ["data.k"],
        have,
        MANUAL_NOTE,
    )


def test_a_manual_kind_applied_without_berths_label_is_still_a_step() -> None:
    have = config_map(managed=False)
    change = only(make_plan([config_map()], [have], manual={"ConfigMap": MANUAL_NOTE}))
    assert change.action == MANUAL
    assert change.fields == [f"metadata.labels.{MANAGED_BY}", f"metadata.labels.{POLICY_HASH}"]


def test_kinds_not_named_manual_are_written() -> None:
    plan = make_plan([config_map(), queue()], [], manual={"Topology": MANUAL_NOTE})
    assert [c.action for c in plan.changes] == [CREATE, CREATE]
    assert make_plan([config_map()], []).changes[0].action == CREATE


# ------------------------------------------------------------------ leftovers


def test_a_leftover_of_berths_is_deleted_and_others_are_never_touched() -> None:
    plan = make_plan(
        [queue("kept")],
        [queue("kept"), queue("gone"), queue("theirs", managed=False)],
    )
    assert [(c.action, c.name) for c in plan.changes] == [(UNCHANGED, "kept"), (DELETE, "gone")]
    gone = plan.changes[1]
    assert (gone.desired, gone.actual, gone.note) == (None, queue("gone"), "")
    assert plan.prune_refused is False


def test_leftovers_come_after_the_wanted_in_identity_order() -> None:
    plan = make_plan(
        [queue("z"), queue("a")],
        [
            obj("LocalQueue", "b", namespace="n2"),
            obj("LocalQueue", "b", namespace="n1"),
            queue("y"),
            obj("ResourceFlavor", "f"),
        ],
    )
    assert [(c.action, c.kind, c.namespace, c.name) for c in plan.changes] == [
        (CREATE, "ClusterQueue", "", "z"),
        (CREATE, "ClusterQueue", "", "a"),
        (DELETE, "ClusterQueue", "", "y"),
        (DELETE, "LocalQueue", "n1", "b"),
        (DELETE, "LocalQueue", "n2", "b"),
        (DELETE, "ResourceFlavor", "", "f"),
    ]


@pytest.mark.parametrize("kind", ["ClusterQueue", "LocalQueue"])
def test_a_leftover_queue_holding_workloads_is_drained_first(kind: str) -> None:
    busy = obj(kind, "old", spec={}, status={"admittedWorkloads": 2})
    change = make_plan([queue("new")], [queue("new"), busy]).changes[1]
    assert (change.action, change.actual, change.desired) == (DRAIN, busy, None)
    assert change.note == "draining: deleted once its workloads are gone"


@pytest.mark.parametrize("kind", ["ClusterQueue", "LocalQueue"])
def test_a_leftover_queue_already_draining_is_kept_until_empty(kind: str) -> None:
    draining = obj(kind, "old", spec={"stopPolicy": "HoldAndDrain"}, status={"pendingWorkloads": 1})
    change = make_plan([queue("new")], [draining]).changes[1]
    assert (change.action, change.note) == (KEEP, "draining: deleted once its workloads are gone")
    # Another stop policy still needs the drain written.
    held = obj(kind, "old", spec={"stopPolicy": "Hold"}, status={"pendingWorkloads": 1})
    assert make_plan([queue("new")], [held]).changes[1].action == DRAIN
    no_spec = obj(kind, "old", spec=None, status={"pendingWorkloads": 1}) | {"spec": None}
    assert make_plan([queue("new")], [no_spec]).changes[1].action == DRAIN


def test_an_empty_leftover_queue_and_a_busy_leftover_of_another_kind_are_deleted() -> None:
    empty = obj("ClusterQueue", "old", spec={}, status={"admittedWorkloads": 0})
    flavor = obj("ResourceFlavor", "f", status={"admittedWorkloads": 1})
    plan = make_plan([queue("new")], [empty, flavor])
    assert [c.action for c in plan.changes[1:]] == [DELETE, DELETE]


@pytest.mark.parametrize(
    ("kind", "note"),
    [
        ("Namespace", "namespaces are never deleted by Berth"),
        ("ConfigMap", "Kueue's manager configuration is never deleted by Berth"),
    ],
)
def test_namespaces_and_kueues_configuration_are_never_deleted(kind: str, note: str) -> None:
    change = make_plan([queue("new")], [obj(kind, "x", namespace="n")]).changes[1]
    assert (change.action, change.note, change.actual) == (
        KEEP,
        note,
        obj(kind, "x", namespace="n"),
    )
    assert change.identity == (kind, "n", "x")


def test_an_empty_policy_prunes_nothing() -> None:
    plan = make_plan([], [queue("a"), obj("LocalQueue", "b", namespace="n")])
    assert plan.prune_refused is True
    assert [(c.identity, c.actual) for c in plan.changes] == [
        (("ClusterQueue", "", "a"), queue("a")),
        (("LocalQueue", "n", "b"), obj("LocalQueue", "b", namespace="n")),
    ]
    assert [(c.action, c.note) for c in plan.changes] == [
        (KEEP, "not pruned: the policy is empty"),
        (KEEP, "not pruned: the policy is empty"),
    ]
    assert plan.writes == []


def test_a_policy_of_configuration_only_is_empty_too() -> None:
    plan = make_plan([config_map()], [config_map(), queue("a")])
    assert plan.prune_refused is True
    assert [(c.action, c.name) for c in plan.changes] == [
        (UNCHANGED, "kueue-manager-config"),
        (KEEP, "a"),
    ]


def test_an_empty_policy_on_an_empty_cluster_refuses_nothing() -> None:
    assert make_plan([], []).prune_refused is False
    assert make_plan([], [queue("theirs", managed=False)]) == Plan([], prune_refused=False)
    assert make_plan([queue("a")], [queue("b")]).prune_refused is False


# ------------------------------------------------------------------ the plan as a whole


def test_writes_summary_and_the_recorded_form() -> None:
    plan = make_plan(
        [queue("new"), queue("new2"), queue("same"), queue("edited"), queue("theirs")],
        [
            queue("same"),
            queue("edited", spec={"cohortName": "x"}),
            queue("theirs", managed=False),
            queue("gone"),
            obj("LocalQueue", "busy", namespace="n", status={"reservingWorkloads": 1}),
            obj("Namespace", "team-z"),
        ],
    )
    assert plan.summary() == {
        CREATE: 2,
        UNCHANGED: 1,
        UPDATE: 1,
        CONFLICT: 1,
        DELETE: 1,
        DRAIN: 1,
        KEEP: 1,
    }
    assert [(c.action, c.name) for c in plan.writes] == [
        (CREATE, "new"),
        (CREATE, "new2"),
        (UPDATE, "edited"),
        (DELETE, "gone"),
        (DRAIN, "busy"),
    ]
    assert [c.name for c in plan.by_action(UNCHANGED)] == ["same"]
    assert plan.by_action(MANUAL) == []
    assert plan.changes[3].as_dict() == {
        "action": UPDATE,
        "kind": "ClusterQueue",
        "namespace": None,
        "name": "edited",
        "fields": ["spec.cohortName"],
        "drift": True,
        "note": None,
    }
    assert plan.by_action(DRAIN)[0].as_dict() == {
        "action": DRAIN,
        "kind": "LocalQueue",
        "namespace": "n",
        "name": "busy",
        "fields": [],
        "drift": False,
        "note": "draining: deleted once its workloads are gone",
    }
    assert make_plan([], []).summary() == {}


def test_manual_changes_are_not_writes() -> None:
    plan = make_plan([config_map(), queue()], [], manual={"ConfigMap": MANUAL_NOTE})
    assert [c.action for c in plan.writes] == [CREATE]
