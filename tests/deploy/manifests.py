"""The kustomize overlays under deploy/, built with the envtest kubectl (the only
kustomize on these machines), as plain objects for the tests to read."""

from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.envtest import unavailable
from tests.envtest.controlplane import Unavailable, find_assets

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
RBAC_FILE = DEPLOY / "base" / "rbac.yaml"
# Dev first, production last: the order the suite applies them in.
OVERLAYS = ("dev", "production")
IMAGE = "ghcr.io/berth-dev/berth"
NAMESPACE = "berth"
SERVICE_ACCOUNT = "berth"
# What every Berth process reads from the Secret, and what only web reads.
SECRET_KEYS = ("DATABASE_URL", "CELERY_BROKER_URL", "BERTH_SECRET_KEY")
WEB_SECRET_KEYS = (*SECRET_KEYS, "BERTH_METRICS_TOKEN")
# Berth's identity on the cluster, which no overlay may rename or move.
IDENTITY_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")


def kubectl() -> Path:
    try:
        return find_assets() / "kubectl"
    except Unavailable as exc:
        unavailable(str(exc))


@functools.cache
def _build(overlay: str) -> str:
    done = subprocess.run(
        [str(kubectl()), "kustomize", str(DEPLOY / "overlays" / overlay)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"kubectl kustomize deploy/overlays/{overlay}:\n{done.stderr}")
    return done.stdout


def build(overlay: str) -> Built:
    """The overlay as kubectl kustomize builds it (a fresh copy each call)."""
    text = _build(overlay)
    return Built(overlay, text, [d for d in yaml.safe_load_all(text) if d])


def labels(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict(obj["metadata"].get("labels") or {})


def pod_spec(workload: Mapping[str, Any]) -> dict[str, Any]:
    return dict(workload["spec"]["template"]["spec"])


def containers(workload: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Init containers first, then the containers."""
    spec = pod_spec(workload)
    return [*spec.get("initContainers", []), *spec["containers"]]


def main_container(workload: Mapping[str, Any]) -> dict[str, Any]:
    (container,) = pod_spec(workload)["containers"]
    return dict(container)


def argv(container: Mapping[str, Any]) -> list[str]:
    return [*container.get("command", []), *container.get("args", [])]


def expand(words: list[str], environment: Mapping[str, str]) -> list[str]:
    """``$(VAR)`` in command and args, as the kubelet expands them."""
    return [
        re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: environment[m.group(1)], word)
        for word in words
    ]


@dataclass
class Built:
    overlay: str
    text: str
    objects: list[dict[str, Any]]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def get(self, kind: str, name: str) -> dict[str, Any]:
        found = [o for o in self.of_kind(kind) if o["metadata"]["name"] == name]
        assert found, f"{self.overlay}: no {kind} {name}"
        return found[0]

    def workloads(self) -> list[dict[str, Any]]:
        """Every object with a pod template."""
        return [o for o in self.objects if o["kind"] in ("Deployment", "Job")]

    def berth_workloads(self) -> list[dict[str, Any]]:
        """Berth's own (not the dev overlay's database and Redis)."""
        return [o for o in self.workloads() if labels(o).get("app.kubernetes.io/name") == "berth"]

    def component(self, component: str) -> dict[str, Any]:
        found = [
            o
            for o in self.berth_workloads()
            if labels(o).get("app.kubernetes.io/component") == component
        ]
        assert len(found) == 1, f"{self.overlay}: {len(found)} workloads for {component}"
        return found[0]

    def config(self) -> dict[str, str]:
        """The generated berth-config ConfigMap (its name carries a hash)."""
        (config,) = [
            o for o in self.of_kind("ConfigMap") if o["metadata"]["name"].startswith("berth-config")
        ]
        return dict(config["data"])

    def environment(self, container: Mapping[str, Any]) -> dict[str, str]:
        """What a container's environment holds from ConfigMaps and plain values
        (not the Secret's values, which are not in the build for production)."""
        found: dict[str, str] = {}
        for source in container.get("envFrom", []):
            name = source["configMapRef"]["name"]
            found.update(self.get("ConfigMap", name)["data"])
        for variable in container.get("env", []):
            if "value" in variable:
                found[variable["name"]] = variable["value"]
        return found

    def all_containers(self) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        for workload in self.workloads():
            for container in containers(workload):
                yield workload, container


def rbac_documents() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(RBAC_FILE.read_text()) if d]
