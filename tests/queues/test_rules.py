"""Kueue's validation rules as pure functions (no database)."""

from __future__ import annotations

from typing import Any

import pytest

from queues import quota_rules, rules
from queues.quota_rules import FlavorQuotasSpec, ResourceGroupSpec, ResourceQuotaSpec

GPU = "nvidia.com/gpu"


def group(covered: list[str], *flavors: tuple[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "covered_resources": covered,
        "flavors": [{"name": name, "resources": res} for name, res in flavors],
    }


def rules_broken(
    raw: Any, *, has_parent: bool = True, owner: str = "cluster queue"
) -> set[tuple[str, str]]:
    _, errors = quota_rules.parse_resource_groups(raw, has_parent=has_parent, owner=owner)
    return {(e.field, e.rule) for e in errors}


def test_valid_groups_parse_to_canonical_specs() -> None:
    raw = [
        group(
            ["cpu", GPU],
            (
                "a",
                [
                    {"name": "cpu", "nominal_quota": "500m"},
                    {"name": GPU, "nominal_quota": 8, "borrowing_limit": "4", "lending_limit": "2"},
                ],
            ),
        )
    ]
    groups, errors = quota_rules.parse_resource_groups(raw, has_parent=True)
    assert errors == []
    assert groups == [
        ResourceGroupSpec(
            ("cpu", GPU),
            (
                FlavorQuotasSpec(
                    "a", (ResourceQuotaSpec("cpu", 500), ResourceQuotaSpec(GPU, 8, 4, 2))
                ),
            ),
        )
    ]


def test_limits_need_a_cohort() -> None:
    raw = [
        group(
            [GPU],
            (
                "a",
                [{"name": GPU, "nominal_quota": "8", "borrowing_limit": "1", "lending_limit": "1"}],
            ),
        )
    ]
    assert rules_broken(raw, has_parent=False) == {
        (
            "resource_groups[0].flavors[0].resources[0].borrowing_limit",
            "borrowing-limit-needs-cohort",
        ),
        ("resource_groups[0].flavors[0].resources[0].lending_limit", "lending-limit-needs-cohort"),
    }


def test_lending_limit_at_most_nominal_for_queues_not_cohorts() -> None:
    raw = [group([GPU], ("a", [{"name": GPU, "nominal_quota": "2", "lending_limit": "3"}]))]
    assert rules_broken(raw) == {
        ("resource_groups[0].flavors[0].resources[0].lending_limit", "lending-limit-above-nominal")
    }
    assert rules_broken(raw, owner="cohort") == set()


def test_group_and_flavor_limits() -> None:
    many_groups = [
        group(
            [f"example.com/r{i}"], (f"f{i}", [{"name": f"example.com/r{i}", "nominal_quota": "1"}])
        )
        for i in range(17)
    ]
    assert ("resource_groups", "max-resource-groups") in rules_broken(many_groups)
    many_flavors = [
        group([GPU], *[(f"f{i}", [{"name": GPU, "nominal_quota": "1"}]) for i in range(65)])
    ]
    assert ("resource_groups[0].flavors", "max-flavors-per-group") in rules_broken(many_flavors)
    assert rules_broken([{"covered_resources": [GPU], "flavors": []}]) == {
        ("resource_groups[0].flavors", "min-flavors")
    }


def test_resource_in_one_group_and_flavor_in_one_group() -> None:
    raw = [
        group([GPU], ("a", [{"name": GPU, "nominal_quota": "1"}])),
        group(
            [GPU, "cpu"],
            ("a", [{"name": GPU, "nominal_quota": "1"}, {"name": "cpu", "nominal_quota": "1"}]),
        ),
    ]
    assert rules_broken(raw) == {
        ("resource_groups[1].covered_resources[0]", "resource-in-two-groups"),
        ("resource_groups[1].flavors[0].name", "flavor-in-two-groups"),
    }


def test_flavor_must_list_covered_resources_in_order() -> None:
    raw = [
        group(
            ["cpu", GPU],
            ("a", [{"name": GPU, "nominal_quota": "1"}, {"name": "cpu", "nominal_quota": "1"}]),
            ("b", [{"name": "cpu", "nominal_quota": "1"}]),
        )
    ]
    assert rules_broken(raw) == {
        ("resource_groups[0].flavors[0].resources[0].name", "resources-match-covered"),
        ("resource_groups[0].flavors[0].resources[1].name", "resources-match-covered"),
        ("resource_groups[0].flavors[1].resources", "resources-match-covered"),
    }


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("-1", "non-negative"),
        ("1.5", "quantity-precision"),
        ("lots", "quantity-format"),
        (None, "required"),
    ],
)
def test_quota_amounts(value: Any, rule: str) -> None:
    raw = [group([GPU], ("a", [{"name": GPU, "nominal_quota": value}]))]
    assert rules_broken(raw) == {("resource_groups[0].flavors[0].resources[0].nominal_quota", rule)}


def test_preemption_rules() -> None:
    assert [
        e.rule
        for e in rules.preemption_errors(
            reclaim_within_cohort="Never",
            borrow_within_cohort_policy="LowerPriority",
            max_priority_threshold=None,
        )
    ] == ["borrow-needs-reclaim"]
    assert [
        e.rule
        for e in rules.preemption_errors(
            reclaim_within_cohort="Any",
            borrow_within_cohort_policy="Never",
            max_priority_threshold=5,
        )
    ] == ["threshold-needs-borrow-policy"]
    assert [
        e.rule
        for e in rules.preemption_errors(
            reclaim_within_cohort="Any",
            borrow_within_cohort_policy="LowerPriority",
            max_priority_threshold=2**31,
        )
    ] == ["int32-range"]
    assert (
        rules.preemption_errors(
            reclaim_within_cohort="LowerPriority",
            borrow_within_cohort_policy="LowerPriority",
            max_priority_threshold=100,
        )
        == []
    )


def test_priority_int32_bounds() -> None:
    assert rules.priority_value_errors("value", 2**31 - 1) == []
    assert rules.priority_value_errors("value", -(2**31)) == []
    assert [e.rule for e in rules.priority_value_errors("value", 2**31)] == ["int32-range"]
    assert [e.rule for e in rules.priority_value_errors("value", "high")] == ["type"]


def test_weights() -> None:
    assert rules.parse_weight("w", "0.5")[0] == pytest.approx(0.5)
    assert rules.parse_weight("w", "0")[1] == []
    assert [e.rule for e in rules.parse_weight("w", "-1")[1]] == ["non-negative"]
    assert [e.rule for e in rules.parse_weight("w", "1n")[1]] == ["quantity-precision"]


def test_flavor_node_rules() -> None:
    assert [e.rule for e in rules.node_taint_errors("t", [{"key": "k", "effect": "Evict"}])] == [
        "taint-effect"
    ]
    assert [e.rule for e in rules.node_label_errors("l", {f"k{i}": "v" for i in range(9)})] == [
        "max-node-labels"
    ]
    tolerations = [
        {"operator": "Equal", "value": "x"},
        {"key": "k", "operator": "Exists", "value": "v"},
        {"key": "k", "operator": "Maybe"},
        {"key": "k", "effect": "NoSchedule", "toleration_seconds": 30},
    ]
    assert {(e.field, e.rule) for e in rules.toleration_errors("t", tolerations)} == {
        ("t[0].operator", "toleration-empty-key"),
        ("t[1].value", "toleration-exists-value"),
        ("t[2].operator", "toleration-operator"),
        ("t[3].toleration_seconds", "toleration-seconds-no-execute"),
    }
    assert [e.rule for e in rules.topology_errors("default", {})] == ["topology-needs-node-label"]


def test_names_refuse_a_trailing_newline() -> None:
    from queues import names

    assert names.dns_label_error("abc\n") is not None
    assert names.dns_subdomain_error("a.b\n") is not None
    assert names.qualified_name_error("gpu\n") is not None
    assert names.label_value_error("x\n") is not None


def test_taints_are_unique_per_key_and_effect() -> None:
    taints = [
        {"key": "a", "value": "x", "effect": "NoSchedule"},
        {"key": "a", "value": "y", "effect": "NoSchedule"},
        {"key": "a", "value": "y", "effect": "NoExecute"},
    ]
    assert {(e.field, e.rule) for e in rules.node_taint_errors("t", taints)} == {
        ("t[1]", "duplicate-taint")
    }


def test_toleration_values_and_seconds() -> None:
    tolerations = [
        {"key": "a", "operator": "Equal", "value": "not a label value!"},
        {"key": "b", "effect": "NoExecute", "toleration_seconds": 2**63},
        {"key": "c", "effect": "NoExecute", "toleration_seconds": 300},
    ]
    assert {(e.field, e.rule) for e in rules.toleration_errors("t", tolerations)} == {
        ("t[0].value", "label-value"),
        ("t[1].toleration_seconds", "int64-range"),
    }


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("1e30", "range"),
        ("1000001", "range"),
        ("0.0005", "quantity-precision"),
        ("1" * 70, "quantity-format"),
    ],
)
def test_weight_limits_are_errors_not_crashes(value: str, rule: str) -> None:
    assert [e.rule for e in rules.parse_weight("w", value)[1]] == [rule]
