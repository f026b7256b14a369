"""Berth as a ServiceAccount whose role lacks a verb, on the real kube-apiserver,
and Berth's settings pointed at a cluster through a kubeconfig file, as in
production.

``limited_identity`` makes a ServiceAccount ``berth/berth-limited-…`` bound to
deploy/base/rbac.yaml's ClusterRole minus one verb on one resource, waits until
the server enforces it, and removes all three afterwards (Berth's own
``berth`` identity is never touched). ``berth_uses`` sets ``BERTH_CLUSTER=
kubernetes`` with a kubeconfig for a token, so ``get_backend()`` — what the
tasks, the sync and the embedded loop use — reaches the server as that token."""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from kubernetes import client

from queues.backends import get_backend
from queues.backends.kubernetes import KubernetesBackend
from tests.envtest.controlplane import BERTH_NAMESPACE, RBAC_FILE, ControlPlane


def berth_rules() -> list[dict[str, Any]]:
    """The rules of the ClusterRole Berth ships."""
    for document in yaml.safe_load_all(RBAC_FILE.read_text()):
        if document and document.get("kind") == "ClusterRole":
            return list(document["rules"])
    raise AssertionError(f"no ClusterRole in {RBAC_FILE}")


def rules_without(group: str, resource: str, verb: str) -> list[dict[str, Any]]:
    """Berth's rules with ``verb`` taken away on ``resource`` only (the other
    resources of the same rule keep every verb)."""
    rules: list[dict[str, Any]] = []
    found = False
    for rule in berth_rules():
        if group in rule["apiGroups"] and resource in rule["resources"]:
            assert verb in rule["verbs"], (resource, verb, rule)
            found = True
            others = [r for r in rule["resources"] if r != resource]
            if others:
                rules.append({**copy.deepcopy(rule), "resources": others})
            verbs = [v for v in rule["verbs"] if v != verb]
            if verbs:
                rules.append({**copy.deepcopy(rule), "resources": [resource], "verbs": verbs})
        else:
            rules.append(copy.deepcopy(rule))
    assert found, f"Berth's role grants nothing on {resource} in {group!r}"
    return rules


@dataclass
class Identity:
    name: str
    token: str
    api: client.ApiClient

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{BERTH_NAMESPACE}:{self.name}"

    @property
    def backend(self) -> KubernetesBackend:
        return KubernetesBackend(self.api, request_timeout=30)


def _allowed(
    plane: ControlPlane, user: str, verb: str, group: str, resource: str, namespace: str = ""
) -> bool:
    with plane.api_client() as api:
        review = client.AuthorizationV1Api(api).create_subject_access_review(
            client.V1SubjectAccessReview(
                spec=client.V1SubjectAccessReviewSpec(
                    user=user,
                    groups=["system:serviceaccounts", f"system:serviceaccounts:{BERTH_NAMESPACE}"],
                    resource_attributes=client.V1ResourceAttributes(
                        verb=verb, group=group, resource=resource, namespace=namespace or None
                    ),
                )
            )
        )
    return bool(review.status.allowed)


def wait_for_rbac(
    plane: ControlPlane, user: str, verb: str, group: str, resource: str, allowed: bool
) -> None:
    """RBAC reaches the authorizer through an informer: wait until it says so."""
    deadline = time.monotonic() + 30
    while _allowed(plane, user, verb, group, resource) != allowed:
        if time.monotonic() > deadline:
            pytest.fail(f"RBAC never {'allowed' if allowed else 'refused'} {verb} {resource}")
        time.sleep(0.05)


@contextmanager
def limited_identity(
    plane: ControlPlane, *, group: str, resource: str, verb: str
) -> Iterator[Identity]:
    """A ServiceAccount with Berth's role minus ``verb`` on ``resource``."""
    name = f"berth-limited-{uuid.uuid4().hex[:8]}"
    labels = {"app.kubernetes.io/name": "berth-test"}
    plane.apply_manifests(
        [
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": name, "namespace": BERTH_NAMESPACE, "labels": labels},
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": name, "labels": labels},
                "rules": rules_without(group, resource, verb),
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": name, "labels": labels},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": name,
                },
                "subjects": [
                    {"kind": "ServiceAccount", "name": name, "namespace": BERTH_NAMESPACE}
                ],
            },
        ]
    )
    try:
        token = plane.service_account_token(BERTH_NAMESPACE, name)
        with plane.api_client(token) as api:
            identity = Identity(name, token, api)
            # Bound (a verb it keeps is allowed), and the one taken away is refused.
            wait_for_rbac(plane, identity.user, "list", "kueue.x-k8s.io", "clusterqueues", True)
            wait_for_rbac(plane, identity.user, verb, group, resource, False)
            yield identity
    finally:
        plane.kubectl(
            "delete", "--ignore-not-found", f"clusterrolebinding/{name}", f"clusterrole/{name}"
        )
        plane.kubectl(
            "delete", "--ignore-not-found", "-n", BERTH_NAMESPACE, f"serviceaccount/{name}"
        )


@contextmanager
def berth_uses(
    kubeconfig: Path | None,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    home: Path,
) -> Iterator[None]:
    """``BERTH_CLUSTER=kubernetes`` with ``kubeconfig`` as ~/.kube/config (the
    client takes KUBECONFIG's value at import, so the home directory is what a
    test can point elsewhere); None: no kubeconfig at all."""
    (home / ".kube").mkdir(parents=True, exist_ok=True)
    target = home / ".kube" / "config"
    if kubeconfig is not None and kubeconfig != target:
        target.write_text(kubeconfig.read_text())
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    settings.BERTH_CLUSTER = "kubernetes"
    settings.BERTH_KUBE_CONTEXT = ""
    get_backend.cache_clear()
    try:
        yield
    finally:
        get_backend.cache_clear()
        kubernetes.client.Configuration.set_default(None)
