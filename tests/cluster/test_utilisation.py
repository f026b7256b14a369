"""GPU utilisation beside allocation: from the DCGM exporter through a
Prometheus HTTP API (a double on loopback, spoken to over real HTTP), or made
up by the simulated cluster and labelled so; unknown otherwise."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone

from cluster.models import CapacitySnapshot, WorkloadRecord, WorkloadState
from cluster.snapshots import snapshot_capacity
from cluster.utilisation import DCGM_QUERY, efficiency
from queues.backends.simulated import SimulatedBackend

GPU = "nvidia.com/gpu"
FLAVORS = [
    {"metadata": {"name": "h100"}, "spec": {"nodeLabels": {"gpu": "h100"}}},
    {"metadata": {"name": "a100"}, "spec": {"nodeLabels": {"gpu": "a100"}}},
]


def node(name: str, gpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"gpu": gpu}},
        "status": {"allocatable": {GPU: "8"}},
    }


@pytest.fixture
def nodes(db: Any) -> SimulatedBackend:
    backend = SimulatedBackend()
    for name, gpu in (("n1", "h100"), ("n2", "h100"), ("n3", "a100")):
        backend.create(node(name, gpu))
    return backend


def gpu_rows() -> dict[str, CapacitySnapshot]:
    return {r.flavor: r for r in CapacitySnapshot.objects.filter(resource=GPU)}


def test_the_simulated_cluster_makes_up_utilisation_and_says_so(
    nodes: SimulatedBackend, settings: Any
) -> None:
    settings.BERTH_CLUSTER, settings.BERTH_PROMETHEUS_URL = "simulated", ""
    WorkloadRecord.objects.create(
        uid="uid-a", namespace="t", name="a", state=WorkloadState.ADMITTED,
        created_at=timezone.now(), pod_sets=[{"name": "main", "count": 2, "requests": {GPU: 4}}],
        flavors={"main": {GPU: "h100"}},
    )  # fmt: skip
    WorkloadRecord.objects.create(
        uid="uid-b", namespace="t", name="b", state=WorkloadState.PENDING,
        created_at=timezone.now(), pod_sets=[{"name": "main", "count": 1, "requests": {GPU: 8}}],
    )  # fmt: skip
    snapshot_capacity(nodes, FLAVORS)
    rows = gpu_rows()
    assert rows["h100"].utilised == round(8 * efficiency("uid-a"), 3)
    assert 0.55 * 8 <= rows["h100"].utilised <= 0.95 * 8
    assert rows["h100"].utilisation_source == "simulated"
    assert rows["a100"].utilised == 0.0
    cpu = CapacitySnapshot.objects.filter(resource="cpu").first()
    assert cpu is None or cpu.utilised is None


def test_no_source_means_unknown(nodes: SimulatedBackend, settings: Any) -> None:
    settings.BERTH_CLUSTER, settings.BERTH_PROMETHEUS_URL = "kubernetes", ""
    snapshot_capacity(nodes, FLAVORS)
    assert all(r.utilised is None and r.utilisation_source == "" for r in gpu_rows().values())


class Prometheus(BaseHTTPRequestHandler):
    queries: list[str] = []
    answer: dict[str, Any] = {}

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        if parts.path != "/api/v1/query":
            self.send_error(404)
            return
        Prometheus.queries.append(parse_qs(parts.query)["query"][0])
        body = json.dumps(Prometheus.answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def prometheus() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Prometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Prometheus.queries = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def vector(**per_host: float) -> dict[str, Any]:
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": {"Hostname": host}, "value": [1764000000.0, str(value)]}
                for host, value in per_host.items()
            ],
        },
    }


def test_dcgm_utilisation_is_summed_per_node_and_mapped_to_flavors(
    nodes: SimulatedBackend, prometheus: str, settings: Any
) -> None:
    settings.BERTH_PROMETHEUS_URL = prometheus
    Prometheus.answer = vector(n1=650.0, n2=150.5, n3=790.0, elsewhere=800.0)
    snapshot_capacity(nodes, FLAVORS)
    rows = gpu_rows()
    assert Prometheus.queries == [DCGM_QUERY]
    assert rows["h100"].utilised == 8.005  # (650 + 150.5) / 100
    assert rows["a100"].utilised == 7.9
    assert rows["h100"].utilisation_source == "prometheus"


def test_prometheus_down_or_refusing_leaves_utilisation_unknown(
    nodes: SimulatedBackend, prometheus: str, settings: Any, caplog: Any
) -> None:
    settings.BERTH_PROMETHEUS_URL = prometheus
    Prometheus.answer = {"status": "error", "errorType": "bad_data", "error": "parse error"}
    snapshot_capacity(nodes, FLAVORS)
    assert all(r.utilised is None for r in gpu_rows().values())
    assert "parse error" in caplog.text
    settings.BERTH_PROMETHEUS_URL = "http://127.0.0.1:9"  # nothing listens there
    CapacitySnapshot.objects.all().delete()
    snapshot_capacity(nodes, FLAVORS, at=timezone.now())
    assert all(r.utilised is None for r in gpu_rows().values())


def test_team_usage_sums_its_namespaces(
    nodes: SimulatedBackend, prometheus: str, settings: Any
) -> None:
    from cluster.models import TeamUsageSnapshot
    from cluster.utilisation import DCGM_BY_NAMESPACE, snapshot_teams
    from tests.factories import team

    settings.BERTH_RECONCILE_ON_CHANGE = False
    team("research", ["research", "research-dev"])
    team("serving", ["serving"])
    for uid, namespace, gpus in (("u1", "research", 8), ("u2", "research-dev", 4)):
        WorkloadRecord.objects.create(
            uid=uid, namespace=namespace, name=uid, state=WorkloadState.ADMITTED,
            created_at=timezone.now(),
            pod_sets=[{"name": "main", "count": 1, "requests": {GPU: gpus}}],
            flavors={"main": {GPU: "h100"}},
        )  # fmt: skip
    settings.BERTH_PROMETHEUS_URL = prometheus
    Prometheus.answer = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": {"namespace": "research"}, "value": [0, "700"]},
                {"metric": {"namespace": "research-dev"}, "value": [0, "150"]},
                {"metric": {"namespace": "kube-system"}, "value": [0, "100"]},
            ],
        },
    }
    snapshot_teams(timezone.now())
    rows = {r.team.slug: r for r in TeamUsageSnapshot.objects.select_related("team")}
    assert Prometheus.queries == [DCGM_BY_NAMESPACE]
    assert (rows["research"].allocated, rows["research"].utilised) == (12, 8.5)
    assert (rows["serving"].allocated, rows["serving"].utilised) == (0, 0.0)
    assert rows["research"].utilisation_source == "prometheus"
    settings.BERTH_PROMETHEUS_URL, settings.BERTH_CLUSTER = "", "simulated"
    later = timezone.now()
    snapshot_teams(later)
    research = TeamUsageSnapshot.objects.get(team__slug="research", at=later)
    expected = 8 * efficiency("u1") + 4 * efficiency("u2")
    assert research.utilised == round(expected, 3) and research.utilisation_source == "simulated"


def test_queue_utilisation_follows_pods_to_their_workloads(
    db: Any, prometheus: str, settings: Any
) -> None:
    from cluster.utilisation import DCGM_BY_POD, by_queue

    for uid, job_name, queue, flavor in (
        ("w1", "train", "research", "h100"),
        ("w2", "train-big", "research-large", "h100"),  # a longer name sharing the prefix
        ("w3", "eval", "serving", "a100"),
    ):
        WorkloadRecord.objects.create(
            uid=uid, namespace="research" if uid != "w3" else "serving", name=f"job-{job_name}",
            job_kind="Job", job_name=job_name, cluster_queue=queue, state=WorkloadState.ADMITTED,
            created_at=timezone.now(),
            pod_sets=[{"name": "main", "count": 1, "requests": {GPU: 8}}],
            flavors={"main": {GPU: flavor}},
        )  # fmt: skip
    settings.BERTH_PROMETHEUS_URL = prometheus

    def pod(namespace: str, name: str, value: float) -> dict[str, Any]:
        return {"metric": {"namespace": namespace, "pod": name}, "value": [0, str(value)]}

    Prometheus.answer = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                pod("research", "train-0-x7k2p", 400),
                pod("research", "train-1-q8m4z", 350),
                pod("research", "train-big-node-0-0-abcde", 780),
                pod("serving", "eval-master-0", 90),
                pod("research", "someone-elses-pod", 800),  # no workload we know
            ],
        },
    }
    assert by_queue() == {
        ("research", "h100"): 7.5,
        ("research-large", "h100"): 7.8,
        ("serving", "a100"): 0.9,
    }
    assert Prometheus.queries == [DCGM_BY_POD]
    settings.BERTH_PROMETHEUS_URL, settings.BERTH_CLUSTER = "", "kubernetes"
    assert by_queue() is None  # nobody measures it


def test_the_simulated_cluster_makes_up_queue_utilisation_too(db: Any, settings: Any) -> None:
    from cluster.utilisation import by_queue

    settings.BERTH_CLUSTER, settings.BERTH_PROMETHEUS_URL = "simulated", ""
    WorkloadRecord.objects.create(
        uid="s1", namespace="t", name="s1", cluster_queue="research", state=WorkloadState.ADMITTED,
        created_at=timezone.now(), pod_sets=[{"name": "main", "count": 2, "requests": {GPU: 4}}],
        flavors={"main": {GPU: "h100"}},
    )  # fmt: skip
    assert by_queue() == {("research", "h100"): 8 * efficiency("s1")}
