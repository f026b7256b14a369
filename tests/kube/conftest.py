"""Fixtures for the API-server double's own tests (the ``test_apiserver_*`` modules).

They were module fixtures of a single ``test_apiserver.py``; now that those tests are split
by topic, the fixtures live here so every module gets the same fresh ``server`` (which must
end with no internal errors) and a client ``api`` bound to it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.kube.apiserver import FakeApiServer


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as fake:
        yield fake
        assert fake.internal_errors == []


@pytest.fixture
def api(server: FakeApiServer) -> Iterator[client.ApiClient]:
    with server.api_client() as api_client:
        yield api_client
