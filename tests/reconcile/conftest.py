from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.reconcile.clusters import ClusterUnderTest, SimulatedCluster


@pytest.fixture(params=["simulated", "kubernetes"])
def cluster(request: pytest.FixtureRequest, db: Any, settings: Any) -> Iterator[ClusterUnderTest]:
    """Berth's simulated cluster, and a real kube-apiserver with Berth as its
    ServiceAccount (tests/envtest)."""
    settings.BERTH_RECONCILE_RETRY_BASE = 0.001
    settings.BERTH_RECONCILE_ON_CHANGE = False
    if request.param == "simulated":
        yield SimulatedCluster()
        return
    yield request.getfixturevalue("kube")
