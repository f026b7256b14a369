"""The showback tests: the jobs tests' organisation, and October 2026 built on
the simulated cluster through sync (``scenario``)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.jobs.conftest import org
from tests.reconcile.clusters import SimulatedCluster
from tests.showback import scenario

__all__ = ["org"]


@pytest.fixture
def october(org: Any, settings: Any) -> scenario.October:
    settings.BERTH_SYNC_INTERVAL = 1800  # snapshots 30 minutes apart count 30 minutes
    settings.BERTH_CLUSTER = "simulated"  # busy GPUs made up, labelled so
    settings.BERTH_PROMETHEUS_URL = ""
    settings.BERTH_CURRENCY = "USD"
    return scenario.build(SimulatedCluster())
