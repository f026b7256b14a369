"""The simulated cluster with kueue_support's objects created."""

from __future__ import annotations

from typing import Any

import pytest

from queues.backends.simulated import SimulatedBackend
from tests.simulation.kueue_support import kueue_objects


@pytest.fixture
def backend(db: Any) -> SimulatedBackend:
    backend = SimulatedBackend()
    for obj in kueue_objects():
        backend.create(obj)
    return backend
