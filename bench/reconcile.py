"""How reconcile scales: 200 teams × 4 queue classes into Kueue.

Builds the organisation of bench/org.py (TEAMS teams, three ClusterQueues each
plus the shared urgent-release queue, a LocalQueue per team namespace and
queue) and reconciles it into two clusters:

- kubernetes, real API server: the official client over HTTPS to a real
  kube-apiserver + etcd (tests/envtest, from KUBEBUILDER_ASSETS or
  ../shared/envtest, with the CRDs of BERTH_CRDS_DIR), as Berth's
  ServiceAccount with RBAC on; calls are counted from the server's audit log;
- kubernetes, double: the same client against the loopback API-server double of
  the test suite (tests/kube/apiserver.py);
- simulated: the embedded cluster, stored in PostgreSQL.

For each it prints the calls made and the time for the first apply, a no-op
reconcile (target: 0 writes, ≤ 2 s) and a one-quota change (target: 1 write).

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/reconcile.py

It creates a scratch database ``berth_bench_<pid>`` on that server and drops
it at the end. Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from typing import Any

from org import ROOT, build_org, quota_groups, with_scratch_database

# Reconcile runs are what this measures: not one per policy write while building.
os.environ["BERTH_RECONCILE_ON_CHANGE"] = "0"


def reconcile_once(backend: Any, calls: Any) -> tuple[Any, float, Counter[str]]:
    from queues.reconcile import reconcile

    before = len(calls())
    started = time.perf_counter()
    run = reconcile(backend)
    elapsed = time.perf_counter() - started
    made = Counter(method for method in calls()[before:])
    return run, elapsed, made


def report(label: str, run: Any, seconds: float, made: Counter[str]) -> None:
    calls = ", ".join(f"{n} {m}" for m, n in sorted(made.items())) or "none"
    print(
        f"  {label:<20} {seconds:7.2f} s   {run.write_calls:5d} write call(s)   "
        f"HTTP/store calls: {calls}   [{run.status}: {run.message}]",
        flush=True,
    )


def measure(name: str, backend: Any, calls: Any) -> None:
    from queues import services
    from queues.models import ClusterQueue

    print(f"\n{name}:", flush=True)
    report("first apply", *reconcile_once(backend, calls))
    report("no-op reconcile", *reconcile_once(backend, calls))
    queue = ClusterQueue.objects.get(name="team-100-training-large")
    services.cluster_queues.update(actor=None, obj=queue, data={"resource_groups": quota_groups(3)})
    report("one quota change", *reconcile_once(backend, calls))
    services.cluster_queues.update(actor=None, obj=queue, data={"resource_groups": quota_groups(2)})
    reconcile_once(backend, calls)


def run(teams: int) -> None:
    from queues.backends.kubernetes import KubernetesBackend
    from queues.backends.simulated import SimulatedBackend
    from queues.models import ClusterQueue, LocalQueue
    from queues.reconcile import desired_objects

    sys.path.insert(0, str(ROOT))
    from tests.kube.apiserver import FakeApiServer

    build_org(teams)
    print(
        f"\npolicy: {ClusterQueue.objects.count()} ClusterQueues, "
        f"{LocalQueue.objects.count()} LocalQueues, {len(desired_objects())} Kueue objects "
        "(with namespaces, flavors, cohort, priority classes, admission check)"
    )

    from tests.envtest.controlplane import (
        BERTH_USER,
        ControlPlane,
        Unavailable,
        find_assets,
        find_crds,
    )

    try:
        assets, crds = find_assets(), find_crds()
    except Unavailable as exc:
        print(f"\nkubernetes (real API server): not measured: {exc}", flush=True)
    else:
        started = time.perf_counter()
        with ControlPlane(assets, crds) as plane:
            print(
                f"\n(real control plane ready in {time.perf_counter() - started:.1f} s: "
                "etcd, kube-apiserver, CRDs Established, Berth's ServiceAccount)",
                flush=True,
            )
            since = plane.audit.offset()
            with plane.berth_client() as api:
                measure(
                    "kubernetes (official client → real kube-apiserver, as Berth's ServiceAccount)",
                    KubernetesBackend(api, request_timeout=30),
                    lambda: [
                        e["verb"] if e.get("objectRef") else "discovery"
                        for e in plane.audit.requests(since, user=BERTH_USER)
                    ],
                )

    with FakeApiServer() as server:
        backend = KubernetesBackend(server.api_client(), request_timeout=30)
        measure(
            "kubernetes (official client → loopback API-server double)",
            backend,
            lambda: [c.method for c in server.calls],
        )

    from queues.models import SimulatedEvent

    # The simulated backend has no request log; its change log counts the writes,
    # and reads are not counted.
    measure(
        "simulated (embedded, PostgreSQL)",
        SimulatedBackend(),
        lambda: ["WRITE"] * SimulatedEvent.objects.count(),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teams", type=int, default=200)
    args = parser.parse_args()
    return with_scratch_database("bench/reconcile.py", lambda: run(args.teams))


if __name__ == "__main__":
    sys.exit(main())
