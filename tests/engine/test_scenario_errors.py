"""Bad scenario files fail with the file, the path to the field and the rule;
nothing runs."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import CommandError, call_command

from queues.engine.scenario import ScenarioError, load, parse

BASE: dict[str, Any] = {
    "resourceFlavors": [{"name": "h100"}],
    "cohorts": [{"name": "c"}],
    "clusterQueues": [
        {
            "name": "q",
            "cohortName": "c",
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "h100",
                            "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}],
                        }
                    ],
                }
            ],
        }
    ],
    "workloads": [
        {"name": "w", "clusterQueue": "q", "podSets": [{"requests": {"nvidia.com/gpu": 1}}]}
    ],
}


def broken(path: list[Any], value: Any) -> dict[str, Any]:
    document = yaml.safe_load(yaml.safe_dump(BASE))
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return document


@pytest.mark.parametrize(
    ("path", "value", "field", "rule"),
    [
        (
            ["clusterQueues", 0, "queueingStrategy"],
            "LIFO",
            "clusterQueues[0].queueingStrategy",
            "unsupported-value",
        ),
        (["clusterQueues", 0, "colour"], "blue", "clusterQueues[0].colour", "unknown-field"),
        (["simulation"], {"requeueDelay": -1}, "simulation.requeueDelay", "range"),
        (["simulation"], {"evictionDelay": "soon"}, "simulation.evictionDelay", "type"),
        (["simulation"], {"tick": 1}, "simulation.tick", "unknown-field"),
        # YAML's .nan and .inf are floats: a time or delay must be finite.
        (["simulation"], {"evictionDelay": float("inf")}, "simulation.evictionDelay", "finite"),
        (["workloads", 0, "admittedAt"], float("nan"), "workloads[0].admittedAt", "finite"),
        (["workloads", 0, "creationTime"], float("-inf"), "workloads[0].creationTime", "finite"),
        # A duration may be .inf (never), not .nan.
        (["workloads", 0, "runtime"], float("nan"), "workloads[0].runtime", "finite"),
        (["workloads", 0, "podsReadyAfter"], float("nan"), "workloads[0].podsReadyAfter", "finite"),
        (
            ["admissionFairSharing"],
            {"usageHalfLifeTime": "1h", "resourceWeights": {"cpu": float("nan")}},
            "admissionFairSharing.resourceWeights.cpu",
            "finite",
        ),
        (
            ["clusterQueues", 0, "resourceGroups", 0, "flavors", 0, "resources", 0, "nominalQuota"],
            "8X",
            "clusterQueues[0].resourceGroups[0].flavors[0].resources[0].nominalQuota",
            "quantity-format",
        ),
        (
            ["clusterQueues", 0, "resourceGroups", 0, "flavors", 0, "name"],
            "a100",
            "clusterQueues[0].resourceGroups[0].flavors[0].name",
            "unknown-flavor",
        ),
        (
            ["workloads", 0, "clusterQueue"],
            "nope",
            "workloads[0].clusterQueue",
            "unknown-cluster-queue",
        ),
        (
            ["workloads", 0, "podSets", 0, "requests", "nvidia.com/gpu"],
            "0.5",
            "workloads[0].podSets[0].requests.nvidia.com/gpu",
            "quantity-precision",
        ),
        (["workloads", 0, "priority"], "urgent", "workloads[0].priority", "unknown-priority-class"),
        (["workloads", 0, "runtime"], "soon", "workloads[0].runtime", "duration"),
        (
            ["workloads", 0, "maximumExecutionTimeSeconds"],
            "soon",
            "workloads[0].maximumExecutionTimeSeconds",
            "duration",
        ),
        (
            ["workloads", 0, "maximumExecutionTimeSeconds"],
            -5,
            "workloads[0].maximumExecutionTimeSeconds",
            "non-negative",
        ),
        (["workloads", 0, "podsReadyAfter"], "later", "workloads[0].podsReadyAfter", "duration"),
        (
            ["clusterQueues", 0, "admissionScope"],
            {"admissionMode": "ByUsage"},
            "clusterQueues[0].admissionScope.admissionMode",
            "unsupported-value",
        ),
        (
            ["resourceFlavors", 0, "topologyName"],
            "nope",
            "resourceFlavors[0].topologyName",
            "unknown-topology",
        ),
        (["topologies"], [{"name": "t", "levels": []}], "topologies[0].levels", "required"),
        (
            ["topologies"],
            [
                {
                    "name": "t",
                    "levels": [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "rack"}],
                }
            ],
            "topologies[0].levels",
            "hostname-last",
        ),
        (
            ["topologies"],
            [{"name": "t", "levels": [{"label": "rack"}]}],
            "topologies[0].levels[0].label",
            "unknown-field",
        ),
        (["nodes"], [{"name": "n", "count": 0, "capacity": {"cpu": 1}}], "nodes[0].count", "range"),
        (["nodes"], [{"name": "n"}], "nodes[0].capacity", "required"),
        (
            ["nodes"],
            [{"name": "n", "capacity": {"cpu": "lots"}}],
            "nodes[0].capacity.cpu",
            "quantity-format",
        ),
        (
            ["workloads", 0, "podSets"],
            [
                {
                    "requests": {"nvidia.com/gpu": 1},
                    "topologyRequest": {"required": "rack", "preferred": "rack"},
                }
            ],
            "workloads[0].podSets[0].topologyRequest",
            "one-of",
        ),
        (
            ["workloads", 0, "podSets"],
            [{"count": 4, "minCount": 5, "requests": {"nvidia.com/gpu": 1}}],
            "workloads[0].podSets[0].minCount",
            "range",
        ),
        (
            ["workloads", 0, "podSets"],
            [{"count": 4, "minCount": 0, "requests": {"nvidia.com/gpu": 1}}],
            "workloads[0].podSets[0].minCount",
            "range",
        ),
        (
            ["workloads", 0, "podSets"],
            [
                {"name": "a", "count": 4, "minCount": 2, "requests": {"nvidia.com/gpu": 1}},
                {"name": "b", "count": 4, "minCount": 2, "requests": {"nvidia.com/gpu": 1}},
            ],
            "workloads[0].podSets[1].minCount",
            "one-min-count",
        ),
        (["waitForPodsReady"], {"enable": "yes"}, "waitForPodsReady.enable", "type"),
        (
            ["waitForPodsReady"],
            {"enable": True, "timeout": 0},
            "waitForPodsReady.timeout",
            "positive",
        ),
        (
            ["waitForPodsReady"],
            {"enable": True, "timeout": "soon"},
            "waitForPodsReady.timeout",
            "duration",
        ),
        (
            ["waitForPodsReady"],
            {"enable": True, "requeuingStrategy": {"timestamp": "Admission"}},
            "waitForPodsReady.requeuingStrategy.timestamp",
            "unsupported-value",
        ),
        (
            ["waitForPodsReady"],
            {"enable": True, "requeuingStrategy": {"backoffLimitCount": -1}},
            "waitForPodsReady.requeuingStrategy.backoffLimitCount",
            "non-negative",
        ),
        (
            ["waitForPodsReady"],
            {"enable": True, "requeuingStrategy": {"backoffBaseSeconds": -1}},
            "waitForPodsReady.requeuingStrategy.backoffBaseSeconds",
            "non-negative",
        ),
        (
            ["waitForPodsReady"],
            {"enable": True, "requeuingStrategy": {"backoffMaxSeconds": 0}},
            "waitForPodsReady.requeuingStrategy.backoffMaxSeconds",
            "positive",
        ),
        (
            ["waitForPodsReady"],
            {"enable": True, "requeuingStrategy": {"backoffBaseSeconds": 1.5}},
            "waitForPodsReady.requeuingStrategy.backoffBaseSeconds",
            "type",
        ),
        (
            ["waitForPodsReady"],
            {"enable": True, "blockAdmission": 1},
            "waitForPodsReady.blockAdmission",
            "type",
        ),
        (["waitForPodsReady"], {"enabled": True}, "waitForPodsReady.enabled", "unknown-field"),
        (
            ["admissionFairSharing"],
            {"usageHalfLifeTime": "1h", "resourceWeights": {"cpu": "heavy"}},
            "admissionFairSharing.resourceWeights.cpu",
            "type",
        ),
        (
            ["admissionFairSharing"],
            {"usageHalfLifeTime": "0s"},
            "admissionFairSharing.usageHalfLifeTime",
            "positive",
        ),
        (
            ["admissionFairSharing"],
            {"usageHalfLifeTime": "1h", "usageSamplingInterval": "often"},
            "admissionFairSharing.usageSamplingInterval",
            "duration",
        ),
        (
            ["clusterQueues", 0, "preemption"],
            {"borrowWithinCohort": {"policy": "LowerPriority"}},
            "clusterQueues[0].preemption.borrowWithinCohort.policy",
            "borrow-needs-reclaim",
        ),
        (
            ["workloads", 0, "admission"],
            {"main": {"nvidia.com/gpu": "h100"}, "other": {}},
            "workloads[0].admission.other",
            "unknown-pod-set",
        ),
        # A name YAML reads as a number or a boolean (2024, yes/no): the
        # compiled engine's classes refuse it as they are built, so it is
        # reported before any is built with it.
        (["clusterQueues", 0, "cohortName"], 2024, "clusterQueues[0].cohortName", "required"),
        (["clusterQueues", 0, "cohortName"], ["c"], "clusterQueues[0].cohortName", "required"),
        (["cohorts", 0, "parentName"], True, "cohorts[0].parentName", "required"),
        (["resourceFlavors", 0, "topologyName"], 3, "resourceFlavors[0].topologyName", "required"),
    ],
)
def test_bad_field_is_named_with_its_rule(
    path: list[Any], value: Any, field: str, rule: str
) -> None:
    with pytest.raises(ScenarioError) as excinfo:
        parse(broken(path, value), "test.yaml")
    assert (field, rule) in {(e.field, e.rule) for e in excinfo.value.errors}, excinfo.value
    assert str(excinfo.value).startswith("test.yaml: ")


def test_cohort_cycle_is_refused() -> None:
    document = broken(
        ["cohorts"], [{"name": "a", "parentName": "b"}, {"name": "b", "parentName": "a"}]
    )
    with pytest.raises(ScenarioError) as excinfo:
        parse(document, "cycle.yaml")
    assert {e.rule for e in excinfo.value.errors} == {"cohort-cycle"}


def test_every_error_is_reported_at_once() -> None:
    document = broken(["workloads"], [{"name": "Bad Name", "clusterQueue": "nope"}])
    with pytest.raises(ScenarioError) as excinfo:
        parse(document)
    fields = {e.field for e in excinfo.value.errors}
    assert {
        "workloads[0].name",
        "workloads[0].clusterQueue",
        "workloads[0].podSets[0].requests",
    } <= fields


def test_kueue_objects_can_be_pasted() -> None:
    document = {
        "resourceFlavors": [
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ResourceFlavor",
                "metadata": {"name": "h100"},
                "spec": {},
            }
        ],
        "workloadPriorityClasses": [
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": "high"},
                "value": 1000,
            }
        ],
        "clusterQueues": [
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": "q"},
                "spec": BASE["clusterQueues"][0] | {},
            }
        ],
        "workloads": [
            {
                "name": "w",
                "clusterQueue": "q",
                "priority": "high",
                "podSets": [{"requests": {"nvidia.com/gpu": 1}}],
            }
        ],
    }
    document["clusterQueues"][0]["spec"].pop("name")
    scenario = parse(document)
    assert scenario.workloads[0].priority == 1000
    assert scenario.policy.cohorts["c"].parent is None  # named only: an implicit root cohort


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"missing\.yaml"):
        load(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("clusterQueues: [\n")
    with pytest.raises(ScenarioError) as excinfo:
        load(bad)
    assert excinfo.value.errors[0].rule == "yaml"


@pytest.mark.parametrize("command", ["admission_cycle", "simulate"])
def test_command_refuses_a_bad_scenario_and_runs_nothing(tmp_path: Path, command: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(broken(["clusterQueues", 0, "queueingStrategy"], "LIFO")))
    out = tmp_path / "out"
    out.mkdir()
    options = (
        ["--json"]
        if command == "admission_cycle"
        else ["--json", str(out / "run.json"), "--html", str(out / "run.html")]
    )
    stdout, stderr = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError) as excinfo:
        call_command(command, str(path), *options, stdout=stdout, stderr=stderr)
    assert str(path) in str(excinfo.value)
    assert "clusterQueues[0].queueingStrategy" in str(excinfo.value)
    assert "unsupported-value" in str(excinfo.value)
    # Nothing ran: no result printed, no progress, no report written.
    assert stdout.getvalue() == "" and stderr.getvalue() == ""
    assert list(out.iterdir()) == []


def test_a_negative_requeue_after_is_refused_naming_the_check() -> None:
    document = yaml.safe_load(yaml.safe_dump(BASE))
    document["clusterQueues"][0]["admissionChecksStrategy"] = {
        "admissionChecks": [{"name": "prov"}]
    }
    document["workloads"][0]["admission"] = {"main": {"nvidia.com/gpu": "h100"}}
    document["workloads"][0]["admissionChecks"] = {
        "prov": {"state": "Retry", "requeueAfterSeconds": -1}
    }
    with pytest.raises(ScenarioError) as caught:
        parse(document)
    assert [(e.field, e.rule) for e in caught.value.errors] == [
        ("workloads[0].admissionChecks.prov.requeueAfterSeconds", "non-negative")
    ]


def test_go_durations_from_kueues_configuration_are_read() -> None:
    document = broken(
        ["waitForPodsReady"],
        {"enable": True, "timeout": "1h30m0s", "requeuingStrategy": {"backoffLimitCount": 2}},
    )
    ready = parse(document).policy.wait_for_pods_ready
    assert ready is not None
    assert (ready.timeout, ready.backoff_limit, ready.timestamp) == (5400.0, 2, "Eviction")


def test_kueues_manager_config_yields_only_the_keys_the_engine_reads() -> None:
    from queues.engine.configuration import manager_configuration

    text = yaml.safe_dump(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta1",
            "kind": "Configuration",
            "integrations": {"frameworks": ["batch/job"]},
            "fairSharing": {"enable": True},
            "waitForPodsReady": {"enable": True, "timeout": "5m"},
        }
    )
    assert manager_configuration(text) == {
        "fairSharing": {"enable": True},
        "waitForPodsReady": {"enable": True, "timeout": "5m"},
    }
    assert manager_configuration("- not: a mapping") == {}
    assert manager_configuration(": broken") == {}


def test_a_cluster_queue_admission_scope_is_read() -> None:
    document = broken(
        ["clusterQueues", 0, "admissionScope"], {"admissionMode": "UsageBasedAdmissionFairSharing"}
    )
    queue = parse(document).policy.cluster_queues["q"]
    assert queue.admission_mode == "UsageBasedAdmissionFairSharing"
