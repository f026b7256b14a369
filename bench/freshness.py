"""How fresh is a job's state with the workload watch running?

On a scratch database: one team's queues reconciled into the cluster, the
workload watch running in a thread as ``manage.py sync_watch`` runs it, and no
periodic follow of jobs. For each of ``--jobs`` jobs in turn: submit it,
create it on the cluster, let Kueue admit it, and time how long until the
job's own state (what the API and its page show) says admitted, and until its
timeline (the Workload's events) shows the admission. Then it is cancelled,
freeing the quota for the next. Prints p50/p95/max of those lags; asserts
nothing.

``--cluster simulated`` (the default): the simulated cluster, whose Kueue
admits. ``--cluster envtest``: a real kube-apiserver + etcd (tests/envtest,
from KUBEBUILDER_ASSETS or ../shared/envtest, with the CRDs of
BERTH_CRDS_DIR), Berth as its ServiceAccount over the official client; no
Kueue runs there, so the benchmark plays it (tests/envtest/kueue_player.py:
the Workload for the Job, then quota reserved and admitted, written with
Kueue's field manager), and the periodic relist runs beside the watch every
``--relist-every`` seconds, as beat's sync does (its records are checked: no
live Workload marked deleted).

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/freshness.py
    DATABASE_URL=... .venv/bin/python bench/freshness.py --cluster envtest
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from typing import Any

from org import ROOT, build_org, with_scratch_database

SEEN = ("admitted", "running", "succeeded")


def watch_in_background(backend: Any, stop: threading.Event) -> threading.Thread:
    def run() -> None:
        from django.db import connection

        from cluster.sync import watch_workloads

        try:
            while not stop.is_set():
                watch_workloads(backend, timeout_seconds=2, rounds=1)
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def one_job(index: int, admin: Any, backend: Any, kueue: Any, timeout: float) -> float | None:
    from jobs import services
    from jobs.models import JobRequest

    job = services.submit(
        admin,
        {
            "name": f"fresh-{index}",
            "team": "team-000",
            "queue": "interactive-dev",
            "image": "registry.example.com/trainer:1",
            "nodes": 1,
            "gpus_per_node": 1,
            "command": ["python", "train.py"],
        },
    )
    services.create_on_cluster(backend, job.pk)
    kueue.tick(time.time())
    changed = time.monotonic()
    while time.monotonic() - changed < timeout:
        if JobRequest.objects.filter(pk=job.pk, state__in=SEEN).exists():
            lag = time.monotonic() - changed
            break
        time.sleep(0.02)
    else:
        lag = None
    services.cancel(admin, JobRequest.objects.get(pk=job.pk))
    services.delete_from_cluster(backend, job.pk)
    kueue.tick(time.time())
    return lag


def summary(what: str, lags: list[float], missed: int, timeout: float) -> str:
    if not lags:
        return f"{what}: none within {timeout:.0f} s ({missed} jobs)"
    lags = sorted(lags)
    p95 = lags[max(0, int(len(lags) * 0.95) - 1)]
    return (
        f"{what}: p50 {statistics.median(lags):.2f} s, p95 {p95:.2f} s, max {lags[-1]:.2f} s "
        f"over {len(lags)} jobs; {missed} not seen within {timeout:.0f} s"
    )


def until_both(
    first: Any, second: Any, since: float, timeout: float
) -> tuple[float | None, float | None]:
    """Seconds from ``since`` until each condition first held (None: not
    within ``timeout``), polled every 20 ms."""
    found: list[float | None] = [None, None]
    while time.monotonic() - since < timeout and None in found:
        for slot, condition in enumerate((first, second)):
            if found[slot] is None and condition():
                found[slot] = time.monotonic() - since
        time.sleep(0.02)
    return found[0], found[1]


def relist_in_background(backend: Any, every: float, stop: threading.Event) -> threading.Thread:
    def run() -> None:
        from django.db import connection

        from cluster.sync import sync_workloads

        try:
            while not stop.is_set():
                sync_workloads(backend)
                stop.wait(every)
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def run_envtest(args: argparse.Namespace) -> None:
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from cluster.models import EventType, WorkloadEvent, WorkloadRecord
    from jobs import services
    from jobs.models import JobRequest
    from queues.backends import get_backend
    from queues.backends.kubernetes import KubernetesBackend
    from queues.models import ReconcileRun
    from queues.reconcile import reconcile

    sys.path.insert(0, str(ROOT))
    from tests.envtest.cluster import EnvtestCluster
    from tests.envtest.controlplane import ControlPlane, Unavailable, find_assets, find_crds
    from tests.envtest.kueue_player import KueuePlayer

    try:
        assets, crds = find_assets(), find_crds()
    except Unavailable as exc:
        print(f"no real API server: {exc}", file=sys.stderr)
        return
    build_org(1)
    admin = get_user_model().objects.create_superuser("bench", password="x")
    started = time.perf_counter()
    with ControlPlane(assets, crds) as plane:
        print(f"(real control plane ready in {time.perf_counter() - started:.1f} s)", flush=True)
        kube = EnvtestCluster(plane)
        # Berth's settings name the real server, as its ServiceAccount: the
        # create a submit queues after its commit (eager here) goes there.
        home = plane.workdir / "home"
        (home / ".kube").mkdir(parents=True)
        (home / ".kube" / "config").write_text(plane.berth_kubeconfig.read_text())
        os.environ["HOME"] = str(home)
        os.environ.pop("KUBECONFIG", None)
        os.environ.pop("KUBERNETES_SERVICE_HOST", None)
        settings.BERTH_CLUSTER, settings.BERTH_KUBE_CONTEXT = "kubernetes", ""
        get_backend.cache_clear()
        with plane.berth_client() as api, plane.berth_client() as watch_api:
            backend = KubernetesBackend(api, request_timeout=30)
            run_ = reconcile(backend, trigger=ReconcileRun.Trigger.MANUAL)
            assert run_.status == ReconcileRun.Status.SUCCEEDED, run_.errors
            stop = threading.Event()
            watcher = watch_in_background(KubernetesBackend(watch_api, request_timeout=30), stop)
            with plane.berth_client() as relist_api:
                relister = relist_in_background(
                    KubernetesBackend(relist_api, request_timeout=30), args.relist_every, stop
                )
                print(
                    f"{args.jobs} jobs, one at a time, on the real API server; the watch "
                    f"following, a relist every {args.relist_every:g} s ...",
                    flush=True,
                )
                states: list[float] = []
                timelines: list[float] = []
                missed = [0, 0]
                for index in range(args.jobs):
                    job = services.submit(
                        admin,
                        {
                            "name": f"fresh-{index}",
                            "kind": "Job",
                            "team": "team-000",
                            "queue": "interactive-dev",
                            "image": "registry.example.com/trainer:1",
                            "nodes": 1,
                            "gpus_per_node": 1,
                            "command": ["python", "train.py"],
                        },
                    )
                    made = kube.get("Job", job.name, job.namespace)
                    assert made is not None, JobRequest.objects.get(pk=job.pk).message
                    kueue = KueuePlayer(kube, job.cluster_queue)
                    name = kueue.workload_for(made)
                    kueue.admit(name, job.namespace, gpus=1)
                    changed = time.monotonic()
                    seen = until_both(
                        lambda pk=job.pk: JobRequest.objects.filter(pk=pk, state__in=SEEN).exists(),
                        lambda name=name: WorkloadEvent.objects.filter(
                            workload__name=name, type=EventType.ADMITTED
                        ).exists(),
                        changed,
                        args.timeout,
                    )
                    for slot, lag in enumerate(seen):
                        if lag is None:
                            missed[slot] += 1
                        else:
                            (states, timelines)[slot].append(lag)
                    services.cancel(admin, JobRequest.objects.get(pk=job.pk))
                    services.delete_from_cluster(backend, job.pk)
                    kueue.delete(name, job.namespace)  # Kueue, its job gone
                    if (index + 1) % max(1, args.jobs // 5) == 0:
                        print(f"  {index + 1}/{args.jobs}", flush=True)
                stop.set()
                watcher.join(10)
                relister.join(30)
        deleted_live = WorkloadRecord.objects.filter(
            state="deleted", name__in=[w["metadata"]["name"] for w in kube.objects("Workload")]
        ).count()
        kube.close()
    print(summary("job state after Kueue admitted it", states, missed[0], args.timeout))
    print(summary("its timeline (events) by then", timelines, missed[1], args.timeout))
    print(f"live Workloads marked deleted: {deleted_live}")


def run(args: argparse.Namespace) -> None:
    from django.contrib.auth import get_user_model

    from queues.backends.simulated import SimulatedBackend
    from queues.models import ReconcileRun
    from queues.reconcile import reconcile
    from queues.simulation.kueue import SimulatedKueue

    build_org(1)
    admin = get_user_model().objects.create_superuser("bench", password="x")
    backend = SimulatedBackend()
    reconcile(backend, trigger=ReconcileRun.Trigger.MANUAL)
    kueue = SimulatedKueue(backend, 60.0)
    stop = threading.Event()
    watcher = watch_in_background(backend, stop)
    lags: list[float] = []
    missed = 0
    print(f"{args.jobs} jobs, one at a time, the watch following ...", flush=True)
    for index in range(args.jobs):
        lag = one_job(index, admin, backend, kueue, args.timeout)
        if lag is None:
            missed += 1
        else:
            lags.append(lag)
        if (index + 1) % max(1, args.jobs // 5) == 0:
            print(f"  {index + 1}/{args.jobs}", flush=True)
    stop.set()
    watcher.join(10)
    print(summary("job state after Kueue admitted it", lags, missed, args.timeout))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--cluster", choices=["simulated", "envtest"], default="simulated")
    parser.add_argument(
        "--relist-every", type=float, default=1.0, help="envtest: seconds between relists"
    )
    args = parser.parse_args()
    os.environ.setdefault("BERTH_LOG_LEVEL", "warning")  # not a line per task
    if args.cluster == "envtest":
        return with_scratch_database("bench/freshness.py", lambda: run_envtest(args))
    return with_scratch_database("bench/freshness.py", lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
