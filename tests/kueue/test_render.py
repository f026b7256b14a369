"""Rendering: deterministic, labelled, and valid against Kueue v0.19.2's CRDs
(OpenAPI schema and every CEL rule) — what a real API server would accept."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest

from queues.kueue.render import (
    KUEUE_API,
    MANAGED_BY,
    POLICY_HASH,
    PolicyBundle,
    canonical,
    render,
)
from tests.kueue.crds import CEL, UPDATE_ONLY, rules_at, schema

GPU = "nvidia.com/gpu"


def quota(nominal: str, **limits: str) -> dict[str, Any]:
    return {"name": GPU, "nominal_quota": nominal, **limits}


def bundle() -> PolicyBundle:
    group = {
        "covered_resources": ["cpu", GPU],
        "flavors": [
            {
                "name": "h100",
                "resources": [
                    {"name": "cpu", "nominal_quota": "192"},
                    quota("8", borrowing_limit="4", lending_limit="2"),
                ],
            },
            {"name": "spot", "resources": [{"name": "cpu", "nominal_quota": "64"}, quota("4")]},
        ],
    }
    queue = {
        "name": "research",
        "description": "",
        "team": "research",
        "cohort": "org",
        "queue_class": "urgent-release",
        "default_priority_class": None,
        "queueing_strategy": "StrictFIFO",
        "within_cluster_queue": "LowerPriority",
        "reclaim_within_cohort": "Any",
        "borrow_within_cohort_policy": "LowerPriority",
        "borrow_within_cohort_max_priority_threshold": 100,
        "fair_sharing_weight": "1.5",
        "when_can_borrow": "TryNextFlavor",
        "when_can_preempt": "TryNextFlavor",
        "flavor_fungibility_preference": "PreemptionOverBorrowing",
        "stop_policy": "None",
        "admission_mode": "UsageBasedAdmissionFairSharing",
        "resource_groups": [group],
    }
    shared = {
        **queue,
        "name": "shared",
        "team": None,
        "cohort": None,
        "queue_class": None,
        "reclaim_within_cohort": "Never",
        "borrow_within_cohort_policy": "Never",
        "borrow_within_cohort_max_priority_threshold": None,
        "flavor_fungibility_preference": "",
        "when_can_borrow": "MayStopSearch",
        "admission_mode": "",
        "resource_groups": [
            {"covered_resources": [GPU], "flavors": [{"name": "h100", "resources": [quota("2")]}]}
        ],
    }
    return PolicyBundle(
        topologies=[
            {
                "name": "default",
                "description": "racks",
                "levels": [
                    "topology.berth.dev/block",
                    "topology.berth.dev/rack",
                    "kubernetes.io/hostname",
                ],
            }
        ],
        teams=[
            {
                "slug": "research",
                "name": "R",
                "description": "",
                "namespaces": ["research", "research-dev"],
            }
        ],
        flavors=[
            {
                "name": "h100",
                "description": "",
                "node_labels": {"gpu": "h100"},
                "node_taints": [],
                "tolerations": [],
                "capacity_type": "on-demand",
                "topology_name": "",
            },
            {
                "name": "spot",
                "description": "",
                "node_labels": {"gpu": "h100"},
                "node_taints": [{"key": "spot", "value": "true", "effect": "NoSchedule"}],
                "tolerations": [
                    {
                        "key": "spot",
                        "operator": "Exists",
                        "effect": "NoExecute",
                        "toleration_seconds": 30,
                    }
                ],
                "capacity_type": "spot",
                "topology_name": "default",
            },
        ],
        cohorts=[
            {
                "name": "root",
                "description": "",
                "parent": None,
                "fair_sharing_weight": "1",
                "resource_groups": [],
            },
            {
                "name": "org",
                "description": "",
                "parent": "root",
                "fair_sharing_weight": "2",
                "resource_groups": [
                    {
                        "covered_resources": [GPU],
                        "flavors": [{"name": "h100", "resources": [quota("4", lending_limit="8")]}],
                    }
                ],
            },
        ],
        cluster_queues=[queue, shared],
        local_queues=[
            {
                "namespace": ns,
                "name": q,
                "cluster_queue": q,
                "generated": True,
                "stop_policy": "None",
            }
            for ns in ("research", "research-dev")
            for q in ("research", "shared")
        ],
        priority_classes=[{"name": "high", "value": 100000, "description": "urgent"}],
        queue_classes=[{"name": "urgent-release", "requires_approval": True}],
    )


def test_every_rendered_kueue_object_passes_the_crd_schema_and_cel_rules() -> None:
    checked = 0
    for obj in render(bundle()):
        if obj["apiVersion"] != KUEUE_API:
            continue
        # Validator, not validate(): one CRD pattern uses a Go-only inline flag (?i) that
        # Python's re refuses, in a field Berth never sets.
        jsonschema.Draft7Validator(schema(obj["kind"])).validate(obj)
        for path, rule, value in rules_at(schema(obj["kind"]), obj):
            if any(marker in rule for marker in UPDATE_ONLY):
                continue
            assert rule in CEL, f"{obj['kind']}{path}: a CEL rule Berth does not check: {rule}"
            assert CEL[rule](value), f"{obj['kind']} {obj['metadata']['name']}{path}: {rule}"
            checked += 1
    assert checked >= 8


def test_every_cel_rule_of_the_rendered_kinds_is_known() -> None:
    """A new Kueue release adding a rule fails here until Berth checks it too."""
    kinds = (
        "Topology",
        "ResourceFlavor",
        "Cohort",
        "ClusterQueue",
        "LocalQueue",
        "AdmissionCheck",
        "WorkloadPriorityClass",
    )
    found = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for validation in node.get("x-kubernetes-validations", []):
                found.add(validation["rule"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for kind in kinds:
        walk(schema(kind).get("properties", {}).get("spec", {}))
    unknown = {r for r in found if r not in CEL and not any(m in r for m in UPDATE_ONLY)}
    assert not unknown


def test_render_is_deterministic_and_labelled() -> None:
    first = render(bundle())
    shuffled = bundle()
    shuffled.cluster_queues.reverse()
    shuffled.flavors.reverse()
    second = render(shuffled)
    assert json.dumps(first) == json.dumps(second)
    assert first == canonical(first)
    for obj in first:
        labels = obj["metadata"]["labels"]
        assert labels[MANAGED_BY] == "berth" and len(labels[POLICY_HASH]) == 16
    kinds = [o["kind"] for o in first]
    assert kinds.index("ResourceFlavor") < kinds.index("ClusterQueue") < kinds.index("LocalQueue")
    assert kinds.index("Topology") < kinds.index("ResourceFlavor")  # the flavor names it


def test_the_hash_changes_only_when_what_berth_sets_changes() -> None:
    base = {
        o["metadata"]["name"]: o["metadata"]["labels"][POLICY_HASH]
        for o in render(bundle())
        if o["kind"] == "ClusterQueue"
    }
    changed = bundle()
    changed.cluster_queues[0]["resource_groups"][0]["flavors"][0]["resources"][1][
        "nominal_quota"
    ] = "9"
    after = {
        o["metadata"]["name"]: o["metadata"]["labels"][POLICY_HASH]
        for o in render(changed)
        if o["kind"] == "ClusterQueue"
    }
    assert after["research"] != base["research"]
    assert after["shared"] == base["shared"]


def test_cluster_queue_shape() -> None:
    [research] = [
        o
        for o in render(bundle())
        if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "research"
    ]
    spec = research["spec"]
    assert spec["cohortName"] == "org"
    assert spec["namespaceSelector"] == {"matchLabels": {"berth.dev/team": "research"}}
    assert spec["preemption"] == {
        "withinClusterQueue": "LowerPriority",
        "reclaimWithinCohort": "Any",
        "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
    }
    assert spec["admissionChecksStrategy"] == {"admissionChecks": [{"name": "berth-approval"}]}
    assert spec["admissionScope"] == {"admissionMode": "UsageBasedAdmissionFairSharing"}
    assert spec["resourceGroups"][0]["flavors"][0]["resources"][1] == {
        "name": GPU,
        "nominalQuota": "8",
        "borrowingLimit": "4",
        "lendingLimit": "2",
    }
    [shared] = [
        o
        for o in render(bundle())
        if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "shared"
    ]
    assert shared["spec"]["namespaceSelector"] == {
        "matchExpressions": [{"key": "berth.dev/team", "operator": "Exists"}]
    }
    assert "admissionScope" not in shared["spec"]  # no mode: no scope at all


def test_a_rule_breaking_object_is_caught_by_the_checks() -> None:
    [queue] = [
        o
        for o in render(bundle())
        if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "shared"
    ]
    broken = copy.deepcopy(queue)
    broken["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = "1"
    failures = [
        rule
        for _, rule, value in rules_at(schema("ClusterQueue"), broken)
        if rule in CEL and not CEL[rule](value)
    ]
    assert failures and "borrowingLimit" in failures[0]
    with pytest.raises(jsonschema.ValidationError):
        bad = copy.deepcopy(queue)
        bad["spec"]["queueingStrategy"] = "LIFO"
        jsonschema.Draft7Validator(schema("ClusterQueue")).validate(bad)


def test_topology_shape() -> None:
    [topology] = [o for o in render(bundle()) if o["kind"] == "Topology"]
    assert topology["apiVersion"] == KUEUE_API
    assert topology["metadata"]["name"] == "default"
    assert topology["metadata"]["labels"][MANAGED_BY] == "berth"
    assert topology["spec"] == {
        "levels": [
            {"nodeLabel": "topology.berth.dev/block"},
            {"nodeLabel": "topology.berth.dev/rack"},
            {"nodeLabel": "kubernetes.io/hostname"},
        ]
    }
    [spot] = [o for o in render(bundle()) if o["metadata"]["name"] == "spot"]
    assert spot["spec"]["topologyName"] == "default"


@pytest.mark.parametrize(
    ("levels", "broken"),
    [
        (["kubernetes.io/hostname", "topology.berth.dev/rack"], "kubernetes.io/hostname"),
        (["topology.berth.dev/rack", "topology.berth.dev/rack"], "filter(j, j == i)"),
    ],
)
def test_a_rule_breaking_topology_is_caught_by_the_checks(levels: list[str], broken: str) -> None:
    """The CEL checks Berth mirrors fail where Kueue's would, so the schema test
    above proves something about the Topologies Berth renders."""
    [topology] = [o for o in render(bundle()) if o["kind"] == "Topology"]
    bad = copy.deepcopy(topology)
    bad["spec"]["levels"] = [{"nodeLabel": label} for label in levels]
    failures = [
        rule
        for _, rule, value in rules_at(schema("Topology"), bad)
        if rule in CEL and not CEL[rule](value)
    ]
    assert len(failures) == 1 and broken in failures[0]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(schema("Topology")).validate(
            {**bad, "spec": {"levels": [{"nodeLabel": "Not A Label"}]}}
        )
