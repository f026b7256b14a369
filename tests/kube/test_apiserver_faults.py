"""The API-server double's fault injection (``fail_next``, ``delay_next``), driven through
the real ``kubernetes`` client over HTTP, including how urllib3's default retries see it.
Its own module because the reconcile fault tests build on exactly these behaviours."""

from __future__ import annotations

import time

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.kube.apiserver import FakeApiServer
from tests.kube.client_helpers import APPLY, KUEUE, V, apply_cq, cluster_queue, status_of

# --- fault injection ---------------------------------------------------------------------------


def test_fail_next_answers_an_error_status_then_recovers(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    server.fail_next("PATCH", r"/clusterqueues/team-a$", 500)
    with pytest.raises(ApiException) as error:
        apply_cq(api, cluster_queue("team-a"))
    assert error.value.status == 500 and status_of(error)["reason"] == "InternalError"
    assert server.get_object(KUEUE, "clusterqueues", "team-a") is None
    apply_cq(api, cluster_queue("team-a"))
    assert server.get_object(KUEUE, "clusterqueues", "team-a") is not None
    assert [call.method for call in server.write_calls()] == ["PATCH", "PATCH"]

    server.fail_next("PATCH", "/namespaces/team-a$", 429, body="slow down")
    with pytest.raises(ApiException) as error:
        client.CoreV1Api(api).patch_namespace("team-a", {}, field_manager="b", _content_type=APPLY)
    assert error.value.status == 429 and error.value.headers["Retry-After"] == "1"
    assert status_of(error)["message"] == "slow down"
    # urllib3 retries a GET answered 429 with Retry-After (default Retry), so the client never
    # sees this one
    server.reset_calls()
    server.fail_next("GET", "/namespaces$", 429)
    assert client.CoreV1Api(api).list_namespace().items
    assert [call.method for call in server.calls] == ["GET", "GET"]
    server.reset_calls()
    assert server.calls == []


def test_delay_next_trips_the_client_timeout(server: FakeApiServer, api: client.ApiClient) -> None:
    server.delay_next("PATCH", "/clusterqueues/slow$", 1.0)
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        apply_cq(api, cluster_queue("slow"), _request_timeout=0.2)
    # the server still finishes the write the client gave up on, as a real one may
    deadline = time.monotonic() + 3
    while server.get_object(KUEUE, "clusterqueues", "slow") is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)

    # urllib3 retries idempotent reads after a read timeout (default Retry: 3 attempts)
    server.delay_next("GET", "/clusterqueues$", 1.0, times=4)
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        client.CustomObjectsApi(api).list_cluster_custom_object(
            KUEUE, V, "clusterqueues", _request_timeout=0.2
        )
    # The client gives up as its last try times out, which the server may not
    # have read by then (its handler thread is one of four): wait for it,
    # bounded, as for the write above.
    deadline = time.monotonic() + 3
    while [call.method for call in server.calls].count("GET") < 4:
        assert time.monotonic() < deadline, [call.method for call in server.calls]
        time.sleep(0.05)
    assert [call.method for call in server.calls].count("GET") == 4
