"""GET /metrics: Prometheus text exposition of what Postgres holds (queue
status, the newest snapshots, the hourly rollups, jobs, reconcile health), who
may read it, and that its cost does not grow with the number of queues."""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from accounts.models import AccessDenial
from jobs.metrics import (
    CONTENT_TYPE,
    Metric,
    escape_label_value,
    format_value,
    histogram_samples,
    render,
)
from jobs.models import (
    BUCKET_FIELDS,
    WAIT_BUCKETS,
    CapacitySnapshot,
    JobRequest,
    JobState,
    PreemptionRollup,
    QueueSnapshot,
    QueueStatus,
    WaitRollup,
    WorkloadRecord,
)
from queues.models import DriftRecord, PolicyChange, ReconcileRun
from tests.controlplane.test_startup import clean_env, run
from tests.factories import user
from tests.jobs.conftest import Org, job

URL = "/metrics"
GPU = "nvidia.com/gpu"
TOKEN = "s3cret-metrics-token-0123456789"
REMOTE = "203.0.113.7"  # TEST-NET-3: not loopback
OLD = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)
NEW = OLD + timedelta(seconds=30)
HOUR_1 = datetime(2026, 12, 1, 8, tzinfo=UTC)
HOUR_2 = HOUR_1 + timedelta(hours=1)
ODD_REASON = 'Said "no" \\ then\nleft'

# ---------------------------------------------------------------------------
# A small parser for the text format, strict about what the tests rely on
# ---------------------------------------------------------------------------

_NAME = r"[a-zA-Z_][a-zA-Z0-9_]*"
_SAMPLE = re.compile(rf"^({_NAME})(\{{.*\}})? (\S+)$")
_LABEL_NAME = re.compile(rf"({_NAME})=\"")
_UNESCAPE = {"\\": "\\", '"': '"', "n": "\n"}
_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


@dataclass
class Family:
    help: str | None = None
    type: str | None = None
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)


def parse_labels(text: str) -> dict[str, str]:
    """``{a="x",b="y\\"z"}`` → {"a": "x", "b": 'y"z'}, undoing the escapes."""
    assert text.startswith("{") and text.endswith("}"), text
    body, labels, at = text[1:-1], {}, 0
    while at < len(body):
        match = _LABEL_NAME.match(body, at)
        assert match, f"bad label at {body[at:]!r}"
        at = match.end()
        value: list[str] = []
        while body[at] != '"':
            if body[at] == "\\":
                value.append(_UNESCAPE[body[at + 1]])
                at += 2
            else:
                assert body[at] != "\n"
                value.append(body[at])
                at += 1
        labels[match.group(1)] = "".join(value)
        at += 1
        if at < len(body):
            assert body[at] == ",", body[at:]
            at += 1
    return labels


def parse(text: str) -> dict[str, Family]:
    """Families by name. Every family has HELP then TYPE before its samples,
    appears once, and its samples follow it without another family between."""
    assert text.endswith("\n")
    families: dict[str, Family] = {}
    current: str | None = None
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            assert name not in families, f"{name} twice"
            families[name] = Family(help=help_text)
            current = name
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            assert name == current and families[name].type is None, line
            assert kind in ("gauge", "counter", "histogram"), line
            families[name].type = kind
        else:
            match = _SAMPLE.match(line)
            assert match, f"not a sample line: {line!r}"
            name, labels, value = match.groups()
            assert current is not None and families[current].type is not None, line
            family = families[current]
            allowed = {current}
            if family.type == "histogram":
                allowed = {current + suffix for suffix in _HISTOGRAM_SUFFIXES}
            assert name in allowed, f"{name} inside family {current}"
            family.samples.append((name, parse_labels(labels) if labels else {}, float(value)))
    return families


def values(families: dict[str, Family], name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples called ``name`` (a family or a histogram's series), by labels."""
    family = families.get(name) or families[name.rsplit("_", 1)[0]]
    return {
        tuple(sorted(labels.items())): value
        for sample, labels, value in family.samples
        if sample == name
    }


def one(families: dict[str, Family], name: str, **labels: str) -> float:
    return values(families, name)[tuple(sorted(labels.items()))]


def scrape(client: Client, **extra: Any) -> dict[str, Family]:
    response = client.get(URL, **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == CONTENT_TYPE
    return parse(response.content.decode())


# ---------------------------------------------------------------------------
# The format itself (no database)
# ---------------------------------------------------------------------------


def test_label_values_and_help_are_escaped() -> None:
    assert escape_label_value('a\\b"c\nd') == 'a\\\\b\\"c\\nd'
    metric = Metric("berth_x", "gauge", 'Line one\nback\\slash "quotes" stay')
    metric.add(1, {"reason": ODD_REASON})
    text = render([metric])
    assert text == (
        '# HELP berth_x Line one\\nback\\\\slash "quotes" stay\n'
        "# TYPE berth_x gauge\n"
        'berth_x{reason="Said \\"no\\" \\\\ then\\nleft"} 1\n'
    )
    assert parse(text)["berth_x"].samples == [("berth_x", {"reason": ODD_REASON}, 1.0)]


def test_values_use_the_formats_spelling() -> None:
    assert [format_value(v) for v in (3, 2.0, 0.25, math.inf, -math.inf)] == [
        "3",
        "2",
        "0.25",
        "+Inf",
        "-Inf",
    ]
    assert format_value(math.nan) == "NaN"
    assert format_value(1764583230.5) == "1764583230.5"


def test_histogram_buckets_are_cumulative_and_end_with_inf() -> None:
    metric = Metric("berth_h", "histogram", "h")
    histogram_samples(metric, {"q": "a"}, (1, 5), [2, 3], 9.5)  # no +Inf bound: added
    families = parse(render([metric]))
    assert values(families, "berth_h_bucket") == {
        (("le", "1.0"), ("q", "a")): 2,
        (("le", "5.0"), ("q", "a")): 5,
        (("le", "+Inf"), ("q", "a")): 5,
    }
    assert one(families, "berth_h_sum", q="a") == 9.5
    assert one(families, "berth_h_count", q="a") == 5
    with pytest.raises(ValueError, match="bucket counts"):
        histogram_samples(metric, {}, (1,), [1, 2, 3], 0)


def test_names_are_checked() -> None:
    with pytest.raises(ValueError, match="metric name"):
        Metric("berth-x", "gauge", "x")
    with pytest.raises(ValueError, match="label name"):
        Metric("berth_x", "gauge", "x").add(1, {"bad-label": "v"})


def test_render_sorts_whatever_order_it_is_given() -> None:
    def build(seed: int) -> list[Metric]:
        rng = random.Random(seed)
        gauge, hist = Metric("berth_b", "gauge", "b"), Metric("berth_a", "histogram", "a")
        queues = ["q2", "q10", "q1"]
        rng.shuffle(queues)
        for queue in queues:
            gauge.add(len(queue), {"cluster_queue": queue, "flavor": "f"})
            histogram_samples(hist, {"cluster_queue": queue}, WAIT_BUCKETS, [1] * 13, 1.0)
        rng.shuffle(gauge.samples)
        rng.shuffle(hist.samples)
        metrics = [gauge, hist]
        rng.shuffle(metrics)
        return metrics

    first = render(build(1))
    assert all(render(build(seed)) == first for seed in range(2, 8))
    lines = first.splitlines()
    assert lines[0] == "# HELP berth_a a"
    # Buckets by bound (numerically: 10 before 259200 before +Inf), then _sum, _count.
    q1 = [line for line in lines if 'cluster_queue="q1"' in line]
    assert q1[0].startswith('berth_a_bucket{cluster_queue="q1",le="10.0"}')
    assert q1[12].startswith('berth_a_bucket{cluster_queue="q1",le="+Inf"}')
    assert q1[13].startswith("berth_a_sum") and q1[14].startswith("berth_a_count")


# ---------------------------------------------------------------------------
# What the endpoint reads
# ---------------------------------------------------------------------------


def snapshot(at: datetime, queue: str, flavor: str, resource: str, **figures: int) -> None:
    QueueSnapshot.objects.create(
        at=at, cluster_queue=queue, flavor=flavor, resource=resource, **figures
    )


def buckets(**counts: int) -> dict[str, int]:
    """WaitRollup bucket columns by index: buckets(b0=1, b12=2)."""
    return {BUCKET_FIELDS[int(key[1:])]: count for key, count in counts.items()}


@pytest.fixture
def seeded(org: Org) -> dict[str, Any]:
    for name, pending, reserving, admitted in (("research", 3, 2, 1), ("serving", 0, 1, 1)):
        QueueStatus.objects.create(
            kind="ClusterQueue",
            name=name,
            cluster_queue=name,
            pending_workloads=pending,
            reserving_workloads=reserving,
            admitted_workloads=admitted,
            status={"pendingWorkloads": pending, "reservingWorkloads": reserving},
            observed_at=NEW,
        )
    QueueStatus.objects.create(  # a LocalQueue's status is not a ClusterQueue's
        kind="LocalQueue",
        namespace="research",
        name="research",
        cluster_queue="research",
        pending_workloads=3,
        observed_at=NEW,
    )

    snapshot(OLD, "research", "h100", GPU, nominal=16, usage=2)  # superseded
    snapshot(NEW, "research", "h100", GPU, nominal=16, usage=20, borrowed=4)
    snapshot(NEW, "research", "h100", "cpu", nominal=64000, usage=1500, lent=250)
    snapshot(NEW, "research", "h100", "memory", nominal=2**40, usage=3 * 2**30)
    snapshot(NEW, "serving", "h100", GPU, nominal=16, usage=8, lent=4)

    CapacitySnapshot.objects.create(at=OLD, flavor="h100", resource=GPU, allocatable=8, nodes=1)
    for flavor, resource, amount, nodes in (
        ("h100", GPU, 32, 4),
        ("h100", "cpu", 768000, 4),
        ("h100-spot", GPU, 16, 2),
    ):
        CapacitySnapshot.objects.create(
            at=NEW, flavor=flavor, resource=resource, allocatable=amount, nodes=nodes
        )

    WaitRollup.objects.create(
        cluster_queue="research",
        hour=HOUR_1,
        admissions=3,
        wait_seconds_sum=100.0,
        **buckets(b0=1, b1=2),
    )
    WaitRollup.objects.create(
        cluster_queue="research",
        hour=HOUR_2,
        admissions=2,
        wait_seconds_sum=4000.5,
        **buckets(b1=1, b12=1),
    )
    WaitRollup.objects.create(
        cluster_queue="serving",
        hour=HOUR_1,
        admissions=1,
        wait_seconds_sum=5.0,
        **buckets(b0=1),
    )

    for queue, hour, reason, preempted, count, gpu_seconds in (
        ("research", HOUR_1, "InClusterQueue", True, 2, 7200.0),
        ("research", HOUR_2, "InClusterQueue", True, 1, 3600.0),
        ("research", HOUR_2, ODD_REASON, True, 1, 100.0),
        ("research", HOUR_1, "PodsReadyTimeout", False, 4, 50.0),
        ("serving", HOUR_1, "InCohortReclamation", True, 1, 0.0),
    ):
        PreemptionRollup.objects.create(
            cluster_queue=queue,
            hour=hour,
            reason=reason,
            preempted=preempted,
            count=count,
            gpu_seconds_interrupted=gpu_seconds,
        )

    for name in ("sft-a", "sft-b", "sft-c"):
        response = org.alice.post("/api/v1/jobs/", job(name=name), format="json")
        assert response.status_code == 201, response.content
    JobRequest.objects.filter(name="sft-a").update(state=JobState.RUNNING)
    JobRequest.objects.filter(name="sft-b").update(state=JobState.PREEMPTED)

    applied = ReconcileRun.objects.create(
        trigger="periodic", backend="simulated", status="succeeded", policy_version=7
    )
    failed = ReconcileRun.objects.create(
        trigger="periodic",
        backend="simulated",
        status="failed",
        policy_version=9,
        errors=[{"object": "ClusterQueue/a"}, {"object": "ClusterQueue/b"}],
    )
    plan = ReconcileRun.objects.create(  # newer, but dry runs and skips do not count
        trigger="plan", backend="simulated", status="succeeded", dry_run=True, policy_version=9
    )
    skipped = ReconcileRun.objects.create(trigger="periodic", backend="simulated", status="skipped")
    times = {
        applied: (OLD, OLD + timedelta(seconds=5)),
        failed: (NEW, NEW + timedelta(seconds=2)),
        plan: (NEW + timedelta(seconds=10), NEW + timedelta(seconds=11)),
        skipped: (NEW + timedelta(seconds=20), NEW + timedelta(seconds=20)),
    }
    for run_row, (started, finished) in times.items():
        ReconcileRun.objects.filter(pk=run_row.pk).update(started_at=started, finished_at=finished)
    for name in ("a", "b"):
        DriftRecord.objects.create(run=applied, kind="ClusterQueue", name=name, fields=["spec"])

    record = WorkloadRecord.objects.create(
        uid="uid-1", namespace="research", name="wl", created_at=OLD
    )
    WorkloadRecord.objects.filter(pk=record.pk).update(synced_at=NEW + timedelta(seconds=1))
    return {"policy_version": PolicyChange.objects.latest("id").id}


EXPECTED_FAMILIES = {
    "berth_pending_workloads": "gauge",
    "berth_reserving_active_workloads": "gauge",
    "berth_admitted_active_workloads": "gauge",
    "berth_cluster_queue_resource_reservation": "gauge",
    "berth_cluster_queue_nominal_quota": "gauge",
    "berth_cluster_queue_borrowing": "gauge",
    "berth_cluster_queue_lent": "gauge",
    "berth_admission_wait_time_seconds": "histogram",
    "berth_preempted_workloads_total": "counter",
    "berth_evicted_workloads_total": "counter",
    "berth_preempted_gpu_seconds_total": "counter",
    "berth_node_allocatable": "gauge",
    "berth_nodes": "gauge",
    "berth_jobs": "gauge",
    "berth_reconcile_last_run_timestamp_seconds": "gauge",
    "berth_reconcile_last_success_timestamp_seconds": "gauge",
    "berth_reconcile_last_status": "gauge",
    "berth_reconcile_errors": "gauge",
    "berth_reconcile_drift_total": "counter",
    "berth_policy_version": "gauge",
    "berth_applied_policy_version": "gauge",
    "berth_sync_last_snapshot_timestamp_seconds": "gauge",
    "berth_sync_workloads_last_seen_timestamp_seconds": "gauge",
}


def test_every_family_has_help_and_type_and_a_sorted_place(
    seeded: dict[str, Any], client: Client
) -> None:
    text = client.get(URL).content.decode()
    families = parse(text)
    assert {name: f.type for name, f in families.items()} == EXPECTED_FAMILIES
    assert all(f.help for f in families.values())
    assert list(families) == sorted(families)


def test_queue_status_and_quota_from_the_newest_snapshot_in_base_units(
    seeded: dict[str, Any], client: Client
) -> None:
    families = scrape(client)
    assert values(families, "berth_pending_workloads") == {
        (("cluster_queue", "research"),): 3,
        (("cluster_queue", "serving"),): 0,
    }
    assert one(families, "berth_reserving_active_workloads", cluster_queue="research") == 2
    assert one(families, "berth_admitted_active_workloads", cluster_queue="serving") == 1

    def quota(name: str) -> dict[tuple[str, str, str], float]:
        return {
            (labels["cluster_queue"], labels["flavor"], labels["resource"]): value
            for _, labels, value in families[name].samples
        }

    assert quota("berth_cluster_queue_nominal_quota") == {
        ("research", "h100", GPU): 16,
        ("research", "h100", "cpu"): 64,  # cores, from 64000 milli-CPU
        ("research", "h100", "memory"): 2**40,  # bytes
        ("serving", "h100", GPU): 16,
    }
    assert quota("berth_cluster_queue_resource_reservation") == {
        ("research", "h100", GPU): 20,  # the newest snapshot, not the older 2
        ("research", "h100", "cpu"): 1.5,
        ("research", "h100", "memory"): 3 * 2**30,
        ("serving", "h100", GPU): 8,
    }
    assert quota("berth_cluster_queue_borrowing")[("research", "h100", GPU)] == 4
    assert quota("berth_cluster_queue_lent")[("research", "h100", "cpu")] == 0.25
    assert quota("berth_cluster_queue_lent")[("serving", "h100", GPU)] == 4
    assert 'resource="cpu"} 1.5\n' in client.get(URL).content.decode()


def test_wait_histogram_sums_every_hour_cumulatively(
    seeded: dict[str, Any], client: Client
) -> None:
    families = scrape(client)
    name = "berth_admission_wait_time_seconds"
    research = {
        labels["le"]: value
        for sample, labels, value in families[name].samples
        if sample == f"{name}_bucket" and labels["cluster_queue"] == "research"
    }
    assert list(research) == [*(repr(float(b)) for b in WAIT_BUCKETS[:-1]), "+Inf"]
    counts = list(research.values())
    assert counts == sorted(counts)  # monotone
    # hour 1: one ≤10 s, two ≤30 s; hour 2: one ≤30 s, one beyond 3 days.
    assert research["10.0"] == 1 and research["30.0"] == 4 and research["259200.0"] == 4
    assert research["+Inf"] == 5 == one(families, f"{name}_count", cluster_queue="research")
    assert one(families, f"{name}_sum", cluster_queue="research") == 4100.5
    assert one(families, f"{name}_count", cluster_queue="serving") == 1
    assert one(families, f"{name}_bucket", cluster_queue="serving", le="10.0") == 1


def test_preemptions_and_evictions_by_reason(seeded: dict[str, Any], client: Client) -> None:
    response = client.get(URL)
    text = response.content.decode()
    # A reason with a quote, a backslash and a newline, escaped on the wire.
    assert 'reason="Said \\"no\\" \\\\ then\\nleft"} 1\n' in text
    families = parse(text)
    assert values(families, "berth_preempted_workloads_total") == {
        (("cluster_queue", "research"), ("reason", "InClusterQueue")): 3,  # both hours
        (("cluster_queue", "research"), ("reason", ODD_REASON)): 1,
        (("cluster_queue", "serving"), ("reason", "InCohortReclamation")): 1,
    }
    assert values(families, "berth_evicted_workloads_total") == {
        (("cluster_queue", "research"), ("reason", "Preempted")): 4,
        (("cluster_queue", "research"), ("reason", "PodsReadyTimeout")): 4,
        (("cluster_queue", "serving"), ("reason", "Preempted")): 1,
    }
    assert values(families, "berth_preempted_gpu_seconds_total") == {
        (("cluster_queue", "research"),): 10900.0,  # not the 50 of the timeout eviction
        (("cluster_queue", "serving"),): 0.0,
    }


def test_capacity_jobs_reconcile_and_sync(seeded: dict[str, Any], client: Client) -> None:
    families = scrape(client)
    assert values(families, "berth_node_allocatable") == {
        (("flavor", "h100"), ("resource", GPU)): 32,
        (("flavor", "h100"), ("resource", "cpu")): 768,
        (("flavor", "h100-spot"), ("resource", GPU)): 16,
    }
    assert values(families, "berth_nodes") == {
        (("flavor", "h100"),): 4,
        (("flavor", "h100-spot"),): 2,
    }

    jobs = {labels["state"]: value for _, labels, value in families["berth_jobs"].samples}
    assert set(jobs) == {state.value for state in JobState}
    assert {s: n for s, n in jobs.items() if n} == {"submitted": 1, "running": 1, "preempted": 1}

    assert one(families, "berth_reconcile_last_run_timestamp_seconds") == NEW.timestamp()
    assert (
        one(families, "berth_reconcile_last_success_timestamp_seconds")
        == (OLD + timedelta(seconds=5)).timestamp()
    )
    assert {
        labels["status"]: value
        for _, labels, value in families["berth_reconcile_last_status"].samples
    } == {"running": 0, "succeeded": 0, "partial": 0, "failed": 1}
    assert one(families, "berth_reconcile_errors") == 2
    assert one(families, "berth_reconcile_drift_total") == 2
    assert one(families, "berth_policy_version") == seeded["policy_version"]
    assert one(families, "berth_applied_policy_version") == 7
    assert one(families, "berth_sync_last_snapshot_timestamp_seconds") == NEW.timestamp()
    assert (
        one(families, "berth_sync_workloads_last_seen_timestamp_seconds")
        == (NEW + timedelta(seconds=1)).timestamp()
    )


def test_two_scrapes_are_identical(seeded: dict[str, Any], client: Client) -> None:
    first, second = client.get(URL), client.get(URL)
    assert first.content == second.content
    assert first["Cache-Control"] == "no-store"


def test_an_empty_database_lists_every_family_without_inventing_samples(
    db: Any, client: Client
) -> None:
    families = scrape(client)
    assert set(families) == set(EXPECTED_FAMILIES)
    assert families["berth_pending_workloads"].samples == []
    assert families["berth_reconcile_last_run_timestamp_seconds"].samples == []
    assert one(families, "berth_applied_policy_version") == -1
    assert one(families, "berth_jobs", state="running") == 0


# ---------------------------------------------------------------------------
# Who may read it
# ---------------------------------------------------------------------------


def test_with_a_token_set_only_the_bearer_token_opens_it(
    org: Org, client: Client, settings: Any
) -> None:
    settings.BERTH_METRICS_TOKEN = TOKEN
    for headers in ({}, {"HTTP_AUTHORIZATION": "Bearer wrong"}, {"HTTP_AUTHORIZATION": TOKEN}):
        response = client.get(URL, **headers)  # loopback does not help once a token is set
        assert response.status_code == 401, headers
        assert response["WWW-Authenticate"].startswith("Bearer")
        assert b"BERTH_METRICS_TOKEN" in response.content
    client.force_login(org.users["admin"])  # nor does an admin session
    assert client.get(URL, REMOTE_ADDR=REMOTE).status_code == 401
    ok = client.get(URL, REMOTE_ADDR=REMOTE, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert ok.status_code == 200 and ok["Content-Type"] == CONTENT_TYPE
    assert client.get(URL, HTTP_AUTHORIZATION=f"bearer {TOKEN}").status_code == 200
    reasons = sorted(AccessDenial.objects.filter(path=URL).values_list("reason", flat=True))
    # A token without the Bearer scheme is no credential at all.
    assert reasons == ["bad-credentials", *["not-authenticated"] * 3]


def test_without_a_token_loopback_and_platform_admins_only(
    org: Org, client: Client, settings: Any
) -> None:
    settings.BERTH_METRICS_TOKEN = ""
    assert client.get(URL).status_code == 200  # the test client's 127.0.0.1
    assert client.get(URL, REMOTE_ADDR="::1").status_code == 200
    assert client.get(URL, REMOTE_ADDR="::ffff:127.0.0.1").status_code == 200

    refused = client.get(URL, REMOTE_ADDR=REMOTE)
    assert refused.status_code == 403
    assert refused["Content-Type"].startswith("text/plain")
    body = refused.content.decode()
    assert body.count("\n") == 1 and "set BERTH_METRICS_TOKEN" in body
    # Through a proxy on the same host the address is loopback, the header is not.
    assert client.get(URL, HTTP_X_FORWARDED_FOR=REMOTE).status_code == 403

    member = Client()
    member.force_login(org.users["alice"])
    assert member.get(URL, REMOTE_ADDR=REMOTE).status_code == 403

    admin = Client()
    admin.force_login(org.users["admin"])
    assert admin.get(URL, REMOTE_ADDR=REMOTE).status_code == 200

    grouped = user("carol")
    grouped.groups.add(Group.objects.get_or_create(name="platform-admins")[0])
    group_admin = Client()
    group_admin.force_login(grouped)
    assert group_admin.get(URL, REMOTE_ADDR=REMOTE).status_code == 200

    assert AccessDenial.objects.filter(path=URL, reason="forbidden").count() == 3


def test_only_get(db: Any, client: Client) -> None:
    assert client.post(URL).status_code == 405
    assert client.delete(URL).status_code == 405


def test_the_token_may_come_from_a_file_and_must_not_be_short(tmp_path: Path) -> None:
    show = [
        "-c",
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.BERTH_METRICS_TOKEN)",
    ]
    secret = tmp_path / "metrics-token"
    secret.write_text(TOKEN + "\n", encoding="utf-8")
    env = clean_env(tmp_path, BERTH_SECRET_KEY="k" * 40, BERTH_METRICS_TOKEN_FILE=str(secret))
    result = run(show, env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == TOKEN

    short = run(["manage.py", "check"], clean_env(tmp_path, BERTH_METRICS_TOKEN="short"))
    assert short.returncode == 2
    assert short.stderr.startswith("berth: configuration error: BERTH_METRICS_TOKEN is too short")


# ---------------------------------------------------------------------------
# Cost
# ---------------------------------------------------------------------------


def seed_queues(names: list[str]) -> None:
    for index, name in enumerate(names):
        QueueStatus.objects.create(
            kind="ClusterQueue",
            name=name,
            cluster_queue=name,
            pending_workloads=index,
            observed_at=NEW,
        )
        for resource in (GPU, "cpu"):
            snapshot(NEW, name, "h100", resource, nominal=8, usage=index)
        for hour in (HOUR_1, HOUR_2):
            WaitRollup.objects.create(
                cluster_queue=name,
                hour=hour,
                admissions=1,
                wait_seconds_sum=1.0,
                **buckets(b0=1),
            )
            PreemptionRollup.objects.create(
                cluster_queue=name, hour=hour, reason="InClusterQueue", count=1
            )
            PreemptionRollup.objects.create(
                cluster_queue=name, hour=hour, reason="PodsReadyTimeout", preempted=False, count=1
            )


def test_queries_do_not_grow_with_the_number_of_queues(db: Any, client: Client) -> None:
    CapacitySnapshot.objects.create(at=NEW, flavor="h100", resource=GPU, allocatable=8, nodes=1)
    ReconcileRun.objects.create(trigger="periodic", backend="simulated", status="succeeded")

    def measure() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as queries:
            families = scrape(client)
        return len(queries), len(families["berth_pending_workloads"].samples)

    seed_queues([f"q-{i:02d}" for i in range(3)])
    few, seen_few = measure()
    seed_queues([f"q-{i:02d}" for i in range(3, 30)])
    many, seen_many = measure()
    assert (seen_few, seen_many) == (3, 30)
    assert few == many, (few, many)
    assert many <= 16
