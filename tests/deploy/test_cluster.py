"""The overlays against a real kube-apiserver (the session's, where Berth's
ServiceAccount lives): each is accepted by server-side apply, dev first and
production last, as the README tells an operator to apply it; every pod
template passes the "restricted" Pod Security Standard the namespace enforces;
and Berth's effective permissions are exactly the ClusterRole of
deploy/base/rbac.yaml, before and after every apply. No pods run (no
controllers, no kubelets): what is checked is what the API server accepts and
stores, and what it lets Berth's token do."""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import time
import urllib.error
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.deploy.manifests import (
    DEPLOY,
    IDENTITY_KINDS,
    NAMESPACE,
    OVERLAYS,
    build,
    pod_spec,
    rbac_documents,
)
from tests.envtest.controlplane import ControlPlane

TEAM_NAMESPACE = "deploy-test-team"
UNBOUND = "deploy-test-unbound"

Triple = tuple[str, str, str, str]  # API group, resource, verb, resource name ("" for any)


# ---------------------------------------------------------------- helpers


def expand(rules: list[dict[str, Any]]) -> set[Triple]:
    """RBAC rules as the set of single permissions they grant."""
    return {
        (group, resource, verb, name)
        for rule in rules
        for group in rule.get("apiGroups") or [""]
        for resource in rule.get("resources") or []
        for verb in rule["verbs"]
        for name in rule.get("resourceNames") or [""]
    }


def granted(plane: ControlPlane, token: str, namespace: str) -> tuple[set[Triple], set[str]]:
    """What ``token`` may do in ``namespace``, by its own SelfSubjectRulesReview."""
    with plane.api_client(token) as api:
        review = client.AuthorizationV1Api(api).create_self_subject_rules_review(
            client.V1SelfSubjectRulesReview(
                spec=client.V1SelfSubjectRulesReviewSpec(namespace=namespace)
            )
        )
    status = review.status
    assert not status.incomplete, status.evaluation_error
    resources = expand(
        [
            {
                "apiGroups": r.api_groups,
                "resources": r.resources,
                "verbs": r.verbs,
                "resourceNames": r.resource_names,
            }
            for r in status.resource_rules
        ]
    )
    urls = {
        f"{verb} {url}"
        for r in status.non_resource_rules
        for verb in r.verbs
        for url in r.non_resource_urls
    }
    return resources, urls


def assert_berth_has_exactly_the_shipped_role(plane: ControlPlane, unbound_token: str) -> None:
    """Berth's token may do what the ClusterRole grants plus what every
    authenticated identity may (measured with a ServiceAccount bound to nothing),
    and nothing else, in a team namespace as in its own."""
    (role,) = [d for d in rbac_documents() if d["kind"] == "ClusterRole"]
    shipped = expand(role["rules"])
    for namespace in (TEAM_NAMESPACE, NAMESPACE):
        everyone, everyone_urls = granted(plane, unbound_token, namespace)
        berth, berth_urls = granted(plane, plane.berth_token, namespace)
        assert shipped - everyone, "the role would grant nothing beyond the defaults"
        assert berth - everyone == shipped - everyone, namespace
        assert berth == shipped | everyone, namespace
        assert berth_urls == everyone_urls, namespace


def is_subset(built: Any, stored: Any, where: str = "") -> list[str]:
    """Where ``stored`` lacks or changes what ``built`` sets (the server may add
    defaults, never drop or alter a field)."""
    if isinstance(built, dict):
        if not isinstance(stored, dict):
            return [where]
        return [
            problem
            for key, value in built.items()
            for problem in (
                is_subset(value, stored[key], f"{where}.{key}")
                if key in stored
                else [f"{where}.{key} missing"]
            )
        ]
    if isinstance(built, list):
        if not isinstance(stored, list) or len(built) != len(stored):
            return [where]
        return [
            problem
            for i, (b, s) in enumerate(zip(built, stored, strict=True))
            for problem in is_subset(b, s, f"{where}[{i}]")
        ]
    return [] if built == stored else [f"{where}: {built!r} stored as {stored!r}"]


def stored(plane: ControlPlane, obj: dict[str, Any]) -> dict[str, Any]:
    args = ["get", obj["kind"], obj["metadata"]["name"], "-o", "json"]
    if "namespace" in obj["metadata"]:
        args[1:1] = ["-n", obj["metadata"]["namespace"]]
    return dict(json.loads(plane.kubectl(*args)))


def decoded(obj: dict[str, Any]) -> dict[str, Any]:
    """A Secret's values decoded (kustomize folds long base64 over lines)."""
    if obj["kind"] != "Secret":
        return obj
    data = {k: base64.b64decode(v).decode() for k, v in obj.get("data", {}).items()}
    return {**obj, "data": data}


def kubectl_stdin(plane: ControlPlane, documents: list[dict[str, Any]], *args: str) -> str:
    return plane.kubectl(*args, "-f", "-", stdin=yaml.safe_dump_all(documents))


def overlay_objects() -> list[dict[str, Any]]:
    """What the overlays add beside Berth's identity and namespace."""
    return [
        o
        for overlay in OVERLAYS
        for o in build(overlay).objects
        if o["kind"] not in (*IDENTITY_KINDS, "Namespace")
    ]


def restore(plane: ControlPlane) -> None:
    """Put the session's server back as the overlays found it: their objects
    deleted, and the namespace without the labels kubectl's apply gave it (an
    apply that no longer names a field removes it). The identity stays."""
    kubectl_stdin(plane, overlay_objects(), "delete", "--ignore-not-found", "--wait=false")
    bare = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    kubectl_stdin(plane, [bare], "apply", "--server-side")
    left = plane.kubectl("get", "-n", NAMESPACE, "deploy,job,svc,pdb,cm,secret", "-o", "name")
    assert left.split() == [], left
    namespace = stored(plane, bare)
    assert namespace["metadata"]["labels"] == {"kubernetes.io/metadata.name": NAMESPACE}


@pytest.fixture(scope="module")
def unbound_token(control_plane: ControlPlane) -> Iterator[str]:
    """A team-like namespace, and a ServiceAccount in it that nothing binds: what
    it may do is what every authenticated identity may."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TEAM_NAMESPACE}}
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": UNBOUND, "namespace": TEAM_NAMESPACE},
    }
    control_plane.apply_manifests([namespace, account])
    try:
        yield control_plane.service_account_token(TEAM_NAMESPACE, UNBOUND)
    finally:
        # No namespace controller runs: empty it and finalize it by hand.
        control_plane.kubectl("delete", "serviceaccount", "-n", TEAM_NAMESPACE, UNBOUND)
        control_plane.kubectl("delete", "namespace", TEAM_NAMESPACE, "--wait=false")
        with contextlib.suppress(urllib.error.HTTPError):
            control_plane.raw(
                "PUT",
                f"/api/v1/namespaces/{TEAM_NAMESPACE}/finalize",
                {"metadata": {"name": TEAM_NAMESPACE}, "spec": {"finalizers": []}},
            )


def wait_for_grant(plane: ControlPlane, permission: Triple, present: bool) -> None:
    """The authorizer's cache takes a moment to see a binding come or go."""
    deadline = time.monotonic() + 30
    while (permission in granted(plane, plane.berth_token, TEAM_NAMESPACE)[0]) != present:
        assert time.monotonic() < deadline, f"{permission} never became {present}"
        time.sleep(0.1)


# ------------------------------------------------------------------ tests


def test_berth_may_do_exactly_what_its_cluster_role_grants(
    control_plane: ControlPlane, unbound_token: str
) -> None:
    assert_berth_has_exactly_the_shipped_role(control_plane, unbound_token)


def test_the_overlays_are_accepted_dev_first_then_production(
    control_plane: ControlPlane, unbound_token: str
) -> None:
    try:
        for overlay in OVERLAYS:
            # The README's upgrade step: a Job's pod template cannot change.
            control_plane.kubectl(
                "delete", "job", "-n", NAMESPACE, "berth-migrate", "--ignore-not-found"
            )
            control_plane.kubectl(
                "apply", "--server-side", "-k", str(DEPLOY / "overlays" / overlay)
            )
            for obj in build(overlay).objects:
                problems = is_subset(decoded(obj), decoded(stored(control_plane, obj)))
                assert not problems, (
                    f"{overlay}: {obj['kind']} {obj['metadata']['name']}: {problems}"
                )
            # Applying Berth never changes what Berth may do.
            assert_berth_has_exactly_the_shipped_role(control_plane, unbound_token)
        web = stored(
            control_plane,
            {"kind": "Deployment", "metadata": {"name": "berth-web", "namespace": NAMESPACE}},
        )
        assert web["spec"]["replicas"] == build("production").component("web")["spec"]["replicas"]
    finally:
        restore(control_plane)


def test_every_pod_meets_the_restricted_pod_security_standard(control_plane: ControlPlane) -> None:
    """The namespace enforces "restricted"; each pod template, created as a Pod
    with a server-side dry run, is admitted. So is nothing weaker: the same pod
    without its security contexts is refused, so the check is on."""
    (namespace,) = build("production").of_kind("Namespace")
    kubectl_stdin(control_plane, [namespace], "apply", "--server-side")
    # The ServiceAccount controller would have made it; the dev database and Redis use it.
    default = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": NAMESPACE},
    }
    control_plane.apply_manifests([default])
    try:
        for overlay in OVERLAYS:
            for workload in build(overlay).workloads():
                pod = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"dry-run-{workload['metadata']['name']}",
                        "namespace": NAMESPACE,
                    },
                    "spec": pod_spec(workload),
                }
                control_plane.raw("POST", f"/api/v1/namespaces/{NAMESPACE}/pods?dryRun=All", pod)
        weaker = copy.deepcopy(pod)
        weaker["spec"].pop("securityContext")
        for container in weaker["spec"]["containers"]:
            container.pop("securityContext")
        with pytest.raises(urllib.error.HTTPError) as refused:
            control_plane.raw("POST", f"/api/v1/namespaces/{NAMESPACE}/pods?dryRun=All", weaker)
        assert refused.value.code == 403
        assert "violates PodSecurity" in refused.value.read().decode()
    finally:
        control_plane.kubectl(
            "delete", "serviceaccount", "-n", NAMESPACE, "default", "--ignore-not-found"
        )
        restore(control_plane)


def test_a_permission_beyond_the_role_is_caught(
    control_plane: ControlPlane, unbound_token: str
) -> None:
    """The check above is not vacuous: one more Role bound to Berth in the team
    namespace (reading ConfigMaps) makes it fail, naming that namespace."""
    extra = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "berth-extra", "namespace": TEAM_NAMESPACE},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "berth-extra", "namespace": TEAM_NAMESPACE},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "berth-extra",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "berth", "namespace": NAMESPACE}],
        },
    ]
    read_configmaps = ("", "configmaps", "get", "")
    control_plane.apply_manifests(extra)
    try:
        wait_for_grant(control_plane, read_configmaps, present=True)
        with pytest.raises(AssertionError, match=TEAM_NAMESPACE):
            assert_berth_has_exactly_the_shipped_role(control_plane, unbound_token)
    finally:
        kubectl_stdin(control_plane, extra, "delete", "--ignore-not-found")
        wait_for_grant(control_plane, read_configmaps, present=False)
