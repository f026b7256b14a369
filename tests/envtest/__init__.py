"""A real Kubernetes control plane (etcd + kube-apiserver) for the suite, and
what a test does when the machine has none.

Tests that need the CRDs of ``../shared/crds`` or the control plane skip on a
machine without them, saying which variable to set (``BERTH_CRDS_DIR``,
``KUBEBUILDER_ASSETS``); with ``BERTH_REQUIRE_CLUSTER_TESTS=1`` (CI sets it)
the same condition fails the test instead, so CI always runs them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

from tests.envtest.controlplane import Unavailable, find_crds

REQUIRE_FLAG = "BERTH_REQUIRE_CLUSTER_TESTS"


def required() -> bool:
    return os.environ.get(REQUIRE_FLAG, "").lower() in ("1", "true", "yes")


def unavailable(reason: str) -> NoReturn:
    """Skip with ``reason``; fail with it when CI requires these tests."""
    if required():
        pytest.fail(f"{reason} ({REQUIRE_FLAG} is set, so this fails instead of skipping)")
    pytest.skip(reason)


def crds_dir() -> Path:
    """The CRD folder, or a skip (a failure in CI) saying what to set."""
    try:
        return find_crds()
    except Unavailable as exc:
        unavailable(str(exc))
