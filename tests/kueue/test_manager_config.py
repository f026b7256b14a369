"""Kueue's manager configuration rendered into ConfigMap
kueue-system/kueue-manager-config: exactly Kueue's field names, sections only
when on, deterministic, labelled like every object Berth renders; none at all
until an admin saved a configuration. Pure: no database."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from queues.kueue import manager_config
from queues.kueue.render import (
    MANAGED_BY,
    MANUAL_STEP,
    POLICY_HASH,
    PolicyBundle,
    content_hash,
    render,
    render_kueue_manager_config,
    to_yaml_documents,
)

OFF: dict[str, Any] = {
    "fairSharing": {
        "enable": False,
        "preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"],
    },
    "admissionFairSharing": None,
    "waitForPodsReady": None,
}
ON: dict[str, Any] = {
    "fairSharing": {"enable": True, "preemptionStrategies": ["LessThanOrEqualToFinalShare"]},
    "admissionFairSharing": {"usageHalfLifeTime": "168h", "usageSamplingInterval": "5m"},
    "waitForPodsReady": {
        "enable": True,
        "timeout": "10m",
        "blockAdmission": True,
        "requeuingStrategy": {
            "timestamp": "Creation",
            "backoffLimitCount": 3,
            "backoffBaseSeconds": 30,
            "backoffMaxSeconds": 600,
        },
        "recoveryTimeout": "2m",
    },
}


def document(settings: dict[str, Any]) -> Any:
    config_map = render_kueue_manager_config(settings)
    return yaml.safe_load(config_map["data"]["controller_manager_config.yaml"])


def test_the_configmap_is_kueues_with_berths_labels() -> None:
    config_map = render_kueue_manager_config(ON)
    assert (config_map["apiVersion"], config_map["kind"]) == ("v1", "ConfigMap")
    metadata = config_map["metadata"]
    assert (metadata["namespace"], metadata["name"]) == ("kueue-system", "kueue-manager-config")
    assert metadata["labels"][MANAGED_BY] == "berth"
    assert metadata["labels"][POLICY_HASH] == content_hash(config_map)
    assert list(config_map["data"]) == ["controller_manager_config.yaml"]


def test_everything_on_renders_exactly_kueues_configuration() -> None:
    assert document(ON) == {
        "apiVersion": "config.kueue.x-k8s.io/v1beta1",
        "kind": "Configuration",
        "fairSharing": {"enable": True, "preemptionStrategies": ["LessThanOrEqualToFinalShare"]},
        "admissionFairSharing": {"usageHalfLifeTime": "168h", "usageSamplingInterval": "5m"},
        "waitForPodsReady": {
            "enable": True,
            "timeout": "10m",
            "blockAdmission": True,
            "recoveryTimeout": "2m",
            "requeuingStrategy": {
                "timestamp": "Creation",
                "backoffLimitCount": 3,
                "backoffBaseSeconds": 30,
                "backoffMaxSeconds": 600,
            },
        },
    }


def test_sections_that_are_off_are_left_out() -> None:
    assert document(OFF) == {
        "apiVersion": "config.kueue.x-k8s.io/v1beta1",
        "kind": "Configuration",
        "fairSharing": {
            "enable": False,
            "preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"],
        },
    }


def test_no_requeue_limit_and_no_recovery_timeout_are_left_out_as_kueue_defaults_them() -> None:
    settings = copy.deepcopy(ON)
    settings["waitForPodsReady"]["requeuingStrategy"]["backoffLimitCount"] = None
    settings["waitForPodsReady"]["recoveryTimeout"] = None
    ready = document(settings)["waitForPodsReady"]
    assert "recoveryTimeout" not in ready
    assert "backoffLimitCount" not in ready["requeuingStrategy"]


def test_the_yaml_text_is_deterministic_with_apiversion_and_kind_first() -> None:
    text = manager_config.configuration_yaml(ON)
    assert text == manager_config.configuration_yaml(copy.deepcopy(ON))
    assert text.splitlines()[:2] == [
        "apiVersion: config.kueue.x-k8s.io/v1beta1",
        "kind: Configuration",
    ]


def test_the_bundle_renders_it_only_once_saved_and_first() -> None:
    assert all(o["kind"] != "ConfigMap" for o in render(PolicyBundle()))
    objects = render(PolicyBundle(kueue_configuration=ON))
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("ConfigMap", "kueue-manager-config")
    ]


def test_a_changed_setting_changes_the_hash() -> None:
    changed = copy.deepcopy(ON)
    changed["waitForPodsReady"]["timeout"] = "11m"
    before = render_kueue_manager_config(ON)["metadata"]["labels"][POLICY_HASH]
    after = render_kueue_manager_config(changed)["metadata"]["labels"][POLICY_HASH]
    assert before != after


def test_a_manual_step_is_written_as_yaml_comments_never_as_an_object() -> None:
    config_map = render_kueue_manager_config(ON)
    config_map["metadata"]["annotations"] = {MANUAL_STEP: manager_config.MANUAL_STEP}
    text = to_yaml_documents([config_map])
    assert [d for d in yaml.safe_load_all(text) if d is not None] == []
    assert "merge these keys into controller_manager_config.yaml" in text
    assert "#   waitForPodsReady:" in text and "#     timeout: 10m" in text
    assert "rollout restart deployment kueue-controller-manager" in text
