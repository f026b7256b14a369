"""Shared fixtures. The suite runs on PostgreSQL (``make test`` provides one);
it refuses to start on anything else rather than silently testing SQLite."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from tests import factories
from tests.envtest import unavailable
from tests.envtest.cluster import EnvtestCluster
from tests.envtest.controlplane import ControlPlane, Unavailable, find_assets, find_crds


def pytest_configure(config: pytest.Config) -> None:
    database = settings.DATABASES["default"]
    # One test database per run, so two runs against one server (a developer's and
    # CI's, or two terminals) never drop each other's database.
    database.setdefault("TEST", {})["NAME"] = f"test_berth_{os.getpid()}"
    # Test users' passwords need no PBKDF2 cost; one login test still checks a password.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    engine = database["ENGINE"]
    if "postgresql" not in engine:
        pytest.exit(
            "Berth's tests run on PostgreSQL, but DATABASE_URL is not set (the embedded "
            "SQLite default is for `make run` only). Run `make test`, which starts one, or set "
            "DATABASE_URL=postgresql://user@host:5432/db.",
            returncode=3,
        )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Skips, once per reason with a count (pyproject's ``-r`` leaves them out
    of the per-test summary): a machine without the control plane or the CRDs
    skips well over a hundred tests for one reason, which says what to set."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    if not reasons:
        return
    terminalreporter.section("skipped")
    for reason, count in sorted(reasons.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"{count} skipped: {reason}")
    if any("KUBEBUILDER_ASSETS" in r or "BERTH_CRDS_DIR" in r for r in reasons):
        terminalreporter.write_line(
            "CI runs the cluster tests: .ci/run sets BERTH_REQUIRE_CLUSTER_TESTS=1, "
            "which fails them instead of skipping."
        )


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    """Each test starts on a fresh database, so with none of the figures the
    web process kept from the test before (``frontend.shared_figures``)."""
    from django.core.cache import cache

    cache.clear()
    yield


@pytest.fixture
def queue_class_templates(db: Any) -> None:
    """The queue classes the data migration makes. A transactional test's flush
    removes them for the tests after it; this puts back what is missing, with no
    history and no reconcile, so the test starts as on a fresh database."""
    from queues.models import QueueClass
    from queues.queue_class_templates import QUEUE_CLASS_TEMPLATES

    for template in QUEUE_CLASS_TEMPLATES:
        QueueClass.objects.get_or_create(name=template["name"], defaults=template)


@pytest.fixture
def users(db: Any) -> dict[str, Any]:
    """One user per role, around two teams (alpha, beta)."""
    return factories.role_users()


@pytest.fixture
def clients(users: dict[str, Any]) -> dict[str, APIClient]:
    """An API client per role, authenticated with a real API token (anonymous has none)."""
    return {role: factories.token_client(user) for role, user in users.items()}


@pytest.fixture
def admin_client(clients: dict[str, APIClient]) -> APIClient:
    return clients["admin"]


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """One real etcd + kube-apiserver for the session (``KUBEBUILDER_ASSETS``),
    the CRDs installed (``BERTH_CRDS_DIR``) and Berth's ServiceAccount bound to
    the role in deploy/base/rbac.yaml, with two kubeconfigs: ``admin_kubeconfig``
    (the test, playing Kueue and inspecting) and ``berth_kubeconfig`` (Berth).
    Skips, saying what to set, without them."""
    missing = []
    for find in (find_assets, find_crds):
        try:
            find()
        except Unavailable as exc:
            missing.append(str(exc))
    if missing:
        unavailable("; ".join(missing))
    with ControlPlane(find_assets(), find_crds()) as plane:
        yield plane


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[EnvtestCluster]:
    """The real API server, emptied of what earlier tests left: Berth's backend
    as its ServiceAccount, the test as the admin. Fails the test if Berth was
    refused anything for want of a permission, even where Berth carried on."""
    cluster = EnvtestCluster(control_plane)
    cluster.reset()
    try:
        yield cluster
    finally:
        cluster.close()
    refused = cluster.forbidden()
    assert not refused, (
        "Berth's ServiceAccount lacks permissions it used (deploy/base/rbac.yaml):\n"
        + "\n".join(refused)
    )
