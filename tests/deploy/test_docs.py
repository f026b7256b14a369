"""The docs point at deploy/base/rbac.yaml instead of carrying a copy of the
role that could drift from it, and the README's deploy commands match what the
production overlay expects."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.deploy.manifests import RBAC_FILE, ROOT, WEB_SECRET_KEYS, build

DOCS = [ROOT / "README.md", ROOT / "docs" / "cluster.md"]


def deploy_section() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme.split("\n## Deploy on Kubernetes\n", 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_docs_link_the_shipped_role_and_copy_none(doc: Path) -> None:
    text = doc.read_text()
    assert not re.search(r"kind:\s*ClusterRole\b", text), f"{doc.name} carries a copy of a role"
    targets = {
        (doc.parent / target).resolve()
        for target in re.findall(r"\]\(([^)#\s]+)\)", text)
        if target.endswith("rbac.yaml")
    }
    assert targets == {RBAC_FILE.resolve()}


def test_the_readme_creates_the_secret_the_production_overlay_reads() -> None:
    section = deploy_section()
    production = build("production")
    references = {
        (v["valueFrom"]["secretKeyRef"]["name"], v["valueFrom"]["secretKeyRef"]["key"])
        for workload in production.berth_workloads()
        for c in workload["spec"]["template"]["spec"]["containers"]
        for v in c["env"]
    }
    (secret,) = re.findall(r"create secret generic (\S+)", section)
    keys = set(re.findall(r"--from-literal=(\w+)=", section))
    assert {(secret, key) for key in keys} == references
    assert keys == set(WEB_SECRET_KEYS)


def test_the_readme_names_what_the_overlays_hold() -> None:
    section = deploy_section()
    (job,) = build("production").of_kind("Job")
    assert f"delete job {job['metadata']['name']}" in section
    assert f"job/{job['metadata']['name']}" in section
    for overlay in re.findall(r"-k (deploy/overlays/\w+)", section):
        assert (ROOT / overlay / "kustomization.yaml").is_file(), overlay
    assert {"deploy/overlays/dev", "deploy/overlays/production"} <= set(
        re.findall(r"-k (deploy/overlays/\w+)", section)
    )
