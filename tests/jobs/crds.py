"""The JobSet, PyTorchJob and TrainJob CRDs of ``BERTH_CRDS_DIR`` (data, not
copied into the project), to check what Berth renders the way an API server
with those CRDs installed would: their OpenAPI schemas with unknown fields
refused, their CEL rules, and a few rules of the projects' webhooks.

Structural schemas prune unknown fields silently: a misspelt field would be
accepted and dropped, and the job would run without it. So ``strict`` turns
every object node that declares its properties (and does not preserve unknown
fields) into one that refuses any other property.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import jsonschema

from tests.envtest import crds_dir
from tests.envtest.controlplane import load_yaml
from tests.kueue.crds import UPDATE_ONLY, rules_at

FILES = {
    "JobSet": ("jobset-v0.12.0/jobset.x-k8s.io_jobsets.yaml", "v1alpha2"),
    "PyTorchJob": ("training-operator-v1.9.4/kubeflow.org_pytorchjobs.yaml", "v1"),
    "TrainJob": ("trainer-v2.3.0/trainer.kubeflow.org_trainjobs.yaml", "v1alpha1"),
}
PRESERVE = "x-kubernetes-preserve-unknown-fields"
# The API server checks an object's own metadata itself (the CRD says only
# ``type: object``); these are the fields a client may set on create.
OBJECT_META = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string"},
        "namespace": {"type": "string"},
        "generateName": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "finalizers": {"type": "array", "items": {"type": "string"}},
        "ownerReferences": {"type": "array", "items": {"type": "object"}},
    },
}


@cache
def schema(kind: str) -> dict[str, Any]:
    """The CRD's OpenAPI v3 schema for the version Berth writes, as published."""
    path, version = FILES[kind]
    document = load_yaml(crds_dir() / path)
    for entry in document["spec"]["versions"]:
        if entry["name"] == version:
            return dict(entry["schema"]["openAPIV3Schema"])
    raise KeyError(f"{kind} has no {version}")


def strict(node: Any) -> Any:
    """A copy of a structural schema node in which an object refuses the
    properties it does not declare, unless it preserves unknown fields (then
    nothing below it is pruned, so nothing below it is refused either)."""
    if not isinstance(node, dict):
        return node
    if node.get(PRESERVE):
        return copy.deepcopy(node)
    result = {key: value for key, value in node.items() if key not in ("properties", "items")}
    if "properties" in node:
        result["properties"] = {k: strict(v) for k, v in node["properties"].items()}
    if "items" in node:
        result["items"] = strict(node["items"])
    if isinstance(node.get("additionalProperties"), dict):
        result["additionalProperties"] = strict(node["additionalProperties"])
    for combinator in ("anyOf", "allOf", "oneOf"):
        if combinator in node:
            result[combinator] = [strict(n) for n in node[combinator]]
    is_object = node.get("type") == "object" or "properties" in node
    if is_object and "additionalProperties" not in node:
        # No properties and no additionalProperties: a real server prunes
        # every field of such an object, so none may be sent.
        result["additionalProperties"] = False
    return result


@cache
def strict_schema(kind: str) -> dict[str, Any]:
    result = strict(schema(kind))
    result["properties"]["metadata"] = OBJECT_META
    result["required"] = sorted({*result.get("required", []), "apiVersion", "kind", "metadata"})
    return dict(result)


@cache
def batch_job_spec_schema() -> dict[str, Any]:
    """batch/v1 JobSpec, strict, as the JobSet CRD embeds it (generated from
    the Kubernetes API types): what a rendered batch Job's spec must match."""
    replicated_job = schema("JobSet")["properties"]["spec"]["properties"]["replicatedJobs"]
    return dict(strict(replicated_job["items"]["properties"]["template"]["properties"]["spec"]))


_FORMATS = jsonschema.FormatChecker()


@_FORMATS.checks("int32")
def _int32(value: object) -> bool:
    return not isinstance(value, int) or -(2**31) <= value < 2**31


@_FORMATS.checks("int64")
def _int64(value: object) -> bool:
    return not isinstance(value, int) or -(2**63) <= value < 2**63


_VALIDATORS: dict[int, tuple[dict[str, Any], jsonschema.Draft7Validator]] = {}


def schema_errors(against: dict[str, Any], obj: Any) -> list[str]:
    """Every way ``obj`` breaks the schema, as ``path: message`` lines."""
    held = _VALIDATORS.get(id(against))
    if held is None or held[0] is not against:
        held = (against, jsonschema.Draft7Validator(against, format_checker=_FORMATS))
        _VALIDATORS[id(against)] = held
    validator = held[1]
    return sorted(
        f"{'.'.join(str(p) for p in error.absolute_path) or '<root>'}: {error.message}"
        for error in validator.iter_errors(obj)
    )


def crd_errors(obj: dict[str, Any]) -> list[str]:
    """What the API server would refuse or prune in a JobSet, PyTorchJob or TrainJob."""
    return schema_errors(strict_schema(obj["kind"]), obj)


# --------------------------------------------------------------------- CEL

_RFC1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://.+$")

# Each CEL rule these CRDs carry, as a Python check of a newly created object
# (rules comparing with oldSelf only constrain updates).
CEL: dict[str, Callable[[Any], bool]] = {
    # JobSet .spec
    "!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && "
    "self.replicatedJobs.exists(x, has(x.dependsOn)))": lambda s: (
        not (
            s.get("startupPolicy", {}).get("startupPolicyOrder") == "InOrder"
            and any("dependsOn" in r for r in s.get("replicatedJobs", []))
        )
    ),
    # JobSet .spec.volumeClaimPolicies[]
    "self.templates.all(t, !has(t.metadata.namespace) || size(t.metadata.namespace) == 0)": (
        lambda p: all(not t.get("metadata", {}).get("namespace") for t in p["templates"])
    ),
    # TrainJob (root)
    "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')": lambda o: bool(
        _RFC1035.match(o["metadata"]["name"])
    ),
    "size(self.metadata.name) <= 63": lambda o: len(o["metadata"]["name"]) <= 63,
    # TrainJob .spec.initializer.{dataset,model}.storageUri
    "self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')": lambda u: (
        u == "" or bool(_URI.match(u))
    ),
    # TrainJob .spec.managedBy
    "self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']": (
        lambda m: m in ("trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue")
    ),
    # TrainJob .status.trainerStatus (a controller's field; never rendered)
    "has(self.lastUpdatedTime)": lambda s: "lastUpdatedTime" in s,
}


def cel_rules(kind: str) -> Iterator[str]:
    """Every CEL rule in the CRD's schema."""

    def walk(node: Any) -> Iterator[str]:
        if not isinstance(node, dict):
            return
        for validation in node.get("x-kubernetes-validations", []):
            yield validation["rule"]
        for child in node.get("properties", {}).values():
            yield from walk(child)
        yield from walk(node.get("items"))
        yield from walk(node.get("additionalProperties"))

    yield from walk(schema(kind))


def cel_errors(obj: dict[str, Any]) -> list[str]:
    """The CEL rules the object reaches that it breaks, and any it reaches
    that this module has no check for (so a new CRD release is noticed)."""
    errors = []
    for path, rule, value in rules_at(schema(obj["kind"]), obj):
        if any(marker in rule for marker in UPDATE_ONLY):
            continue
        check = CEL.get(rule)
        if check is None:
            errors.append(f"{path or '<root>'}: no Python check for CEL rule {rule!r}")
        elif not check(value):
            errors.append(f"{path or '<root>'}: breaks {rule!r}")
    return errors


# ---------------------------------------------------------------- webhooks

# The torch runtime plugin of Kubeflow Trainer sets these; a TrainJob may not.
TRAINER_RESERVED_ENV = {
    "PET_NNODES",
    "PET_NPROC_PER_NODE",
    "PET_NODE_RANK",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
}
_IANA_SVC_NAME = re.compile(r"^(?=.*[a-z])[a-z0-9]([a-z0-9]|-(?!-))*[a-z0-9]?$")


def _pod_spec_errors(path: str, pod: dict[str, Any]) -> list[str]:
    errors = []
    for c, container in enumerate(pod.get("containers", [])):
        for port in container.get("ports", []):
            name = port.get("name", "")
            if name and (len(name) > 15 or not _IANA_SVC_NAME.match(name)):
                errors.append(f"{path}.containers[{c}].ports: {name!r} is not an IANA_SVC_NAME")
        names = [e["name"] for e in container.get("env", [])]
        if len(names) != len(set(names)):
            errors.append(f"{path}.containers[{c}].env: duplicate names")
    return errors


def webhook_errors(obj: dict[str, Any]) -> list[str]:
    """Rules the API server (core validation) or the project's admission
    webhook applies beyond the schema, for the fields Berth sets."""
    kind, spec, errors = obj["kind"], obj["spec"], []
    name = obj["metadata"]["name"]
    if kind == "Job":
        if spec.get("completionMode") == "Indexed" and "completions" not in spec:
            errors.append("spec.completions: required for an Indexed Job")
        if spec.get("parallelism", 1) > spec.get("completions", 1):
            errors.append("spec.parallelism: more than completions")
        pod = spec["template"]["spec"]
        if pod.get("restartPolicy") not in ("Never", "OnFailure"):
            errors.append("spec.template.spec.restartPolicy: must be Never or OnFailure")
        errors += _pod_spec_errors("spec.template.spec", pod)
    elif kind == "JobSet":
        dns = spec.get("network", {}).get("enableDNSHostnames")
        for r in spec["replicatedJobs"]:
            if not _RFC1035.match(r["name"]):
                errors.append(f"replicatedJobs {r['name']}: not a DNS-1035 label")
            job = r["template"]["spec"]
            last_job, last_pod = r.get("replicas", 1) - 1, job.get("parallelism", 1) - 1
            if len(f"{name}-{r['name']}-{last_job}-{last_pod}") > 63:
                errors.append(f"replicatedJobs {r['name']}: pod names longer than 63")
            if dns and job.get("completionMode") != "Indexed":
                errors.append("DNS hostnames need Indexed completion mode")
            errors += _pod_spec_errors(f"replicatedJobs {r['name']}", job["template"]["spec"])
    elif kind == "PyTorchJob":
        replicas = spec["pytorchReplicaSpecs"]
        if set(replicas) - {"Master", "Worker"}:
            errors.append("pytorchReplicaSpecs: only Master and Worker")
        if "Master" in replicas and replicas["Master"].get("replicas", 1) != 1:
            errors.append("pytorchReplicaSpecs.Master.replicas: must be 1")
        for replica_type, replica in replicas.items():
            pod = replica["template"]["spec"]
            if not any(c["name"] == "pytorch" for c in pod["containers"]):
                errors.append(f"{replica_type}: needs a container named pytorch")
            errors += _pod_spec_errors(replica_type, pod)
    elif kind == "TrainJob":
        for variable in spec.get("trainer", {}).get("env", []):
            if variable["name"] in TRAINER_RESERVED_ENV:
                errors.append(f"trainer.env: {variable['name']} is set by the torch runtime")
    return errors


def cluster_errors(objects: list[dict[str, Any]]) -> list[str]:
    """Everything a server with the CRDs and the projects' webhooks would refuse or prune."""
    job, *rest = objects
    errors = webhook_errors(job)
    if job["kind"] == "Job":
        errors += schema_errors(batch_job_spec_schema(), job["spec"])
    else:
        errors += crd_errors(job) + cel_errors(job)
    for extra in rest:
        errors += service_errors(extra)
    return errors


def service_errors(obj: dict[str, Any]) -> list[str]:
    """Core validation of a headless Service, for the fields Berth sets."""
    errors = []
    metadata, spec = obj["metadata"], obj["spec"]
    if set(obj) - {"apiVersion", "kind", "metadata", "spec"}:
        errors.append("unknown top-level fields")
    if set(metadata) - set(OBJECT_META["properties"]):  # type: ignore[arg-type]
        errors.append("unknown metadata fields")
    known = {"clusterIP", "publishNotReadyAddresses", "selector", "ports", "type"}
    if set(spec) - known:
        errors.append(f"unknown spec fields {sorted(set(spec) - known)}")
    if not _RFC1035.match(metadata["name"]):
        errors.append("metadata.name: a Service name is a DNS-1035 label")
    for port in spec.get("ports", []):
        if set(port) - {"name", "port", "targetPort", "protocol"}:
            errors.append("ports: unknown fields")
        if not 1 <= port["port"] <= 65535:
            errors.append("ports: port out of range")
    return errors
