"""How busy the GPUs really are, per flavor, beside what Kueue allocated.

- With ``PROMETHEUS_URL``: the DCGM exporter's ``DCGM_FI_DEV_GPU_UTIL`` (0–100 per
  GPU) through the Prometheus HTTP API, summed per node and mapped to flavors
  by the nodes' labels: GPUs busy = Σ utilisation / 100.
- On the simulated cluster: each admitted workload keeps its GPUs busy at an
  efficiency of its own (55–95 %, fixed per workload), labelled as simulated.
- Otherwise: unknown (None); the dashboard shows allocation only.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django.conf import settings

from cluster.models import TeamUsageSnapshot, WorkloadRecord, WorkloadState
from queues.models import TeamNamespace

log = logging.getLogger(__name__)
GPU = "nvidia.com/gpu"
DCGM_QUERY = "sum by (Hostname) (DCGM_FI_DEV_GPU_UTIL)"
# The exporter, run with Kubernetes pod mapping, labels each GPU with the pod using it.
DCGM_BY_NAMESPACE = "sum by (namespace) (DCGM_FI_DEV_GPU_UTIL)"
DCGM_BY_POD = "sum by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL)"
SIMULATED, PROMETHEUS = "simulated", "prometheus"


def source() -> str:
    """Where utilisation comes from with the current settings ("" for nowhere)."""
    if settings.BERTH_PROMETHEUS_URL:
        return PROMETHEUS
    return SIMULATED if settings.BERTH_CLUSTER == "simulated" else ""


def efficiency(uid: str) -> float:
    """A workload's simulated GPU efficiency: stable, 0.55–0.95."""
    return 0.55 + (zlib.crc32(uid.encode()) % 41) / 100


def _admitted() -> list[tuple[str, str, int, float]]:
    """(namespace, flavor, GPUs, simulated efficiency) per admitted pod set."""
    found = []
    for uid, namespace, pod_sets, flavors in WorkloadRecord.objects.filter(
        state=WorkloadState.ADMITTED
    ).values_list("uid", "namespace", "pod_sets", "flavors"):
        share = efficiency(uid)
        for pod_set in pod_sets or []:
            flavor = (flavors or {}).get(pod_set.get("name", "main"), {}).get(GPU)
            if flavor is None:
                continue
            gpus = int((pod_set.get("requests") or {}).get(GPU, 0)) * int(pod_set.get("count", 1))
            found.append((namespace, flavor, gpus, share))
    return found


def simulated_busy() -> dict[str, float]:
    """GPUs busy per flavor on the simulated cluster, from admitted workloads."""
    busy: dict[str, float] = {}
    for _, flavor, gpus, share in _admitted():
        busy[flavor] = busy.get(flavor, 0.0) + gpus * share
    return busy


def by_namespace() -> tuple[dict[str, int], dict[str, float] | None, str]:
    """Per namespace: GPUs allocated to admitted workloads, GPUs busy (None when
    unknown) and the source."""
    allocated: dict[str, int] = {}
    simulated: dict[str, float] = {}
    for namespace, _, gpus, share in _admitted():
        allocated[namespace] = allocated.get(namespace, 0) + gpus
        simulated[namespace] = simulated.get(namespace, 0.0) + gpus * share
    where = source()
    if where == SIMULATED:
        return allocated, simulated, where
    if where == PROMETHEUS:
        try:
            busy = {
                str(sample.get("metric", {}).get("namespace", "")): float(sample["value"][1]) / 100
                for sample in query(settings.BERTH_PROMETHEUS_URL, DCGM_BY_NAMESPACE)
            }
        except (PrometheusError, KeyError, IndexError, TypeError, ValueError) as exc:
            log.warning("GPU utilisation by namespace unknown this time: %s", exc)
            return allocated, None, where
        return allocated, busy, where
    return allocated, None, ""


class PrometheusError(Exception):
    pass


def query(url: str, expression: str, timeout: float = 5.0) -> list[dict[str, Any]]:
    """An instant query; the result vector (``[{"metric": {...}, "value": [t, "v"]}]``)."""
    address = f"{url.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': expression})}"
    try:
        with urllib.request.urlopen(address, timeout=timeout) as response:
            body = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise PrometheusError(f"Prometheus at {url} did not answer {expression!r}: {exc}") from exc
    if body.get("status") != "success":
        raise PrometheusError(f"Prometheus refused {expression!r}: {body.get('error', body)}")
    result = body.get("data", {}).get("result", [])
    return result if isinstance(result, list) else []


def prometheus_busy(
    url: str, nodes: Iterable[Mapping[str, Any]], flavors: Iterable[Mapping[str, Any]]
) -> dict[str, float]:
    """GPUs busy per flavor from DCGM, nodes matched to flavors by node labels."""
    per_node: dict[str, float] = {}
    for sample in query(url, DCGM_QUERY):
        host = sample.get("metric", {}).get("Hostname", "")
        try:
            per_node[host] = float(sample["value"][1]) / 100
        except (KeyError, IndexError, TypeError, ValueError):
            continue
    busy: dict[str, float] = {}
    node_list = list(nodes)
    for flavor in flavors:
        labels = (flavor.get("spec") or {}).get("nodeLabels") or {}
        name = flavor["metadata"]["name"]
        for node in node_list:
            node_labels = node.get("metadata", {}).get("labels", {})
            if all(node_labels.get(k) == v for k, v in labels.items()):
                busy[name] = busy.get(name, 0.0) + per_node.get(node["metadata"]["name"], 0.0)
    return busy


def busy_gpus(
    nodes: Iterable[Mapping[str, Any]], flavors: Iterable[Mapping[str, Any]]
) -> tuple[dict[str, float] | None, str]:
    """(GPUs busy per flavor or None when unknown, the source's name)."""
    where = source()
    if where == PROMETHEUS:
        try:
            return prometheus_busy(settings.BERTH_PROMETHEUS_URL, nodes, flavors), where
        except PrometheusError as exc:
            log.warning("GPU utilisation unknown this time: %s", exc)
            return None, where
    if where == SIMULATED:
        return simulated_busy(), where
    return None, ""


def snapshot_teams(at: datetime) -> int:
    """One TeamUsageSnapshot per team at ``at``: its namespaces summed."""
    allocated, busy, where = by_namespace()
    teams: dict[int, list[float | int | None]] = {}
    for namespace, team_id in TeamNamespace.objects.values_list("name", "team_id"):
        entry = teams.setdefault(team_id, [0, 0.0 if busy is not None else None])
        entry[0] = int(entry[0] or 0) + allocated.get(namespace, 0)
        if busy is not None:
            entry[1] = float(entry[1] or 0.0) + busy.get(namespace, 0.0)
    rows = [
        TeamUsageSnapshot(
            at=at,
            team_id=team_id,
            allocated=int(values[0] or 0),
            utilised=round(float(values[1]), 3) if values[1] is not None else None,
            utilisation_source=where if values[1] is not None else "",
        )
        for team_id, values in teams.items()
    ]
    TeamUsageSnapshot.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def _owner(
    pods: dict[str, list[tuple[str, str, str]]], namespace: str, pod: str
) -> tuple[str, str] | None:
    """(cluster queue, flavor) of the admitted workload whose job owns ``pod``:
    a pod's name starts with its job's name and a dash, whatever the kind
    (``train-0-x7k``, ``train-node-0-1-abc``, ``train-worker-2``); the longest
    matching job name wins."""
    best: tuple[int, str, str] | None = None
    for job_name, queue, flavor in pods.get(namespace, []):
        if pod.startswith(f"{job_name}-") and (best is None or len(job_name) > best[0]):
            best = (len(job_name), queue, flavor)
    return (best[1], best[2]) if best else None


def by_queue() -> dict[tuple[str, str], float] | None:
    """GPUs busy per (ClusterQueue, flavor); None when nobody measures it."""
    where = source()
    if where == "":
        return None
    admitted = WorkloadRecord.objects.filter(state=WorkloadState.ADMITTED).exclude(cluster_queue="")
    if where == SIMULATED:
        busy: dict[tuple[str, str], float] = {}
        for uid, queue, pod_sets, flavors in admitted.values_list(
            "uid", "cluster_queue", "pod_sets", "flavors"
        ):
            for pod_set in pod_sets or []:
                flavor = (flavors or {}).get(pod_set.get("name", "main"), {}).get(GPU)
                if flavor is None:
                    continue
                requests = pod_set.get("requests") or {}
                gpus = int(requests.get(GPU, 0)) * int(pod_set.get("count", 1))
                busy[(queue, flavor)] = busy.get((queue, flavor), 0.0) + gpus * efficiency(uid)
        return busy
    jobs: dict[str, list[tuple[str, str, str]]] = {}
    for namespace, job_name, queue, flavors in admitted.values_list(
        "namespace", "job_name", "cluster_queue", "flavors"
    ):
        flavor = next((f[GPU] for f in (flavors or {}).values() if GPU in f), None)
        if job_name and flavor:
            jobs.setdefault(namespace, []).append((job_name, queue, flavor))
    try:
        samples = query(settings.BERTH_PROMETHEUS_URL, DCGM_BY_POD)
    except PrometheusError as exc:
        log.warning("GPU utilisation by queue unknown this time: %s", exc)
        return None
    busy = {}
    for sample in samples:
        labels = sample.get("metric", {})
        owner = _owner(jobs, str(labels.get("namespace", "")), str(labels.get("pod", "")))
        if owner is None:
            continue  # a GPU no admitted workload of Berth's knowledge holds
        try:
            value = float(sample["value"][1]) / 100
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        busy[owner] = busy.get(owner, 0.0) + value
    return busy
