"""`berth why` and the job page's answer for a gang whose GPUs are free but
scattered over nodes: it says so with the node counts (issue 17's acceptance),
on the nodes sync saw and where Kueue placed the other workloads' pods."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from berth_cli.job_text import why_lines
from cluster.forecast import kueue_pod_sets, pod_sets_of
from cluster.gang_fit import flavor_rooms, job_verdicts, snapshot_gang_fit
from cluster.models import GangFitSnapshot, ObservedNode, WorkloadRecord, WorkloadState
from tests.jobs.conftest import Org, job
from tests.jobs.test_topology_requests import racked

URL = "/api/v1/jobs/"


def running_on(node: str, name: str, gpus: int, *, placed: bool = True) -> None:
    """A serving workload of one pod that Kueue placed on ``node`` (or that
    sync saw without a topologyAssignment, ``placed=False``)."""
    shape: dict[str, Any] = {"name": "main", "count": 1, "requests": {"nvidia.com/gpu": gpus}}
    if placed:
        shape["placed_on"] = {node: 1}
    WorkloadRecord.objects.create(
        uid=f"uid-{name}",
        namespace="serving",
        name=name,
        cluster_queue="serving",
        local_queue="serving",
        requested={"nvidia.com/gpu": gpus},
        pod_sets=[shape],
        flavors={"main": {"nvidia.com/gpu": "h100"}},
        state=WorkloadState.ADMITTED,
        created_at=timezone.now() - timedelta(minutes=5),
        admitted_at=timezone.now() - timedelta(minutes=5),
    )


def scatter(org: Org) -> list[str]:
    """h100 topology-aware on 6 nodes of 8 GPUs; serving runs 4 GPUs on each
    of the first four: 32 GPUs free, but only 2 nodes with 8."""
    racked(org)
    nodes = list(
        ObservedNode.objects.filter(name__startswith="sim-h100-0").values_list("name", flat=True)
    )
    assert len(nodes) == 6, nodes
    for index, node in enumerate(nodes[:4]):
        running_on(node, f"svc-{index}", 4)
    return nodes


def test_a_job_blocked_by_fragmentation_says_so_with_the_node_counts(org: Org) -> None:
    scatter(org)
    answer = org.alice.post(URL, job(nodes=3, gpus_per_node=8), format="json")
    assert answer.status_code == 201, answer.content
    why: Any = org.alice.get(f"{URL}{answer.json()['id']}/explain/").json()
    assert why["fits_now"] is False, why
    assert why["fragmentation"] == (
        "needs 3 nodes with 8 free GPUs each; 32 GPUs are free on flavor h100 but only "
        "2 nodes have 8 free (others: 4 nodes with 4)"
    )
    [verdict] = why["gang_fit"]
    assert (verdict["flavor"], verdict["room_for"], verdict["fragmented"]) == ("h100", 2, True)
    # The engine's own words agree: the quota has room, the nodes do not.
    assert "allows to fit only 2 out of 3 pod(s)" in why["explanation"]["message"]
    # `berth why` prints it under the engine's sentence.
    lines = why_lines(why)
    assert lines.index(f"Fragmented: {why['fragmentation']}.") == 2, lines


def test_a_pytorchjobs_master_and_workers_are_judged_as_one_gang(org: Org) -> None:
    """Master and workers need room at the same time: 3 nodes, not 1 and 2."""
    scatter(org)
    answer = org.alice.post(
        URL + "?dry_run=true", job(kind="PyTorchJob", nodes=3, gpus_per_node=8), format="json"
    )
    [manifest] = answer.json()["manifest"]
    pod_sets = pod_sets_of(kueue_pod_sets(manifest))
    assert [(p["name"], p["count"]) for p in pod_sets] == [("master", 1), ("worker", 2)]
    [verdict] = job_verdicts("research", pod_sets)
    assert (verdict.pods, verdict.room_for, verdict.fragmented) == (3, 2, True)
    assert verdict.message.startswith("needs 3 nodes with 8 free GPUs each; 32 GPUs are free")


def test_a_job_that_fits_is_not_called_fragmented(org: Org) -> None:
    scatter(org)
    answer = org.alice.post(URL, job(nodes=2, gpus_per_node=8), format="json")
    why: Any = org.alice.get(f"{URL}{answer.json()['id']}/explain/").json()
    assert why["fragmentation"] is None
    assert why["gang_fit"][0]["fits"] is True


def test_pods_kueue_placed_without_an_assignment_are_placed_as_the_engine_would(
    org: Org,
) -> None:
    racked(org)
    running_on("", "svc-unplaced", 4, placed=False)
    room = flavor_rooms()["h100"]
    # Best fit, as Kueue: the 4-GPU pod goes on one node, the others stay whole.
    assert sorted(node.free_gpus for node in room.nodes) == [4, 8, 8, 8, 8, 8]


def test_the_snapshot_records_how_scattered_the_free_gpus_are(org: Org) -> None:
    scatter(org)
    at = timezone.now().replace(microsecond=0)
    assert snapshot_gang_fit(at) == 1
    assert snapshot_gang_fit(at) == 1  # the same instant again adds nothing
    [row] = GangFitSnapshot.objects.all()
    assert (row.flavor, row.nodes, row.gpus, row.free_gpus) == ("h100", 6, 48, 32)
    assert (row.whole_free_nodes, row.stranded_gpus) == (2, 16)
    assert row.largest == {
        "": 2,
        "topology.berth.dev/block": 2,
        "topology.berth.dev/rack": 2,
        "kubernetes.io/hostname": 1,
    }
    assert row.fragmentation == 0.5


def test_a_pytorchjob_waiting_for_three_whole_nodes_is_called_fragmented(org: Org) -> None:
    """The engine places master and workers one after another, so the job
    does not "fit now" on two whole nodes, and its page says why."""
    scatter(org)
    answer = org.alice.post(URL, job(kind="PyTorchJob", nodes=3, gpus_per_node=8), format="json")
    assert answer.status_code == 201, answer.content
    why: Any = org.alice.get(f"{URL}{answer.json()['id']}/explain/").json()
    assert why["fits_now"] is False, why
    assert why["fragmentation"].startswith("needs 3 nodes with 8 free GPUs each; 32 GPUs are free")


def test_an_empty_flavor_parameter_is_refused_not_read_as_every_flavor(org: Org) -> None:
    racked(org)
    answer = org.alice.get("/api/v1/gang-fit/?flavor=")
    assert answer.status_code == 400, answer.content
    assert "flavor" in str(answer.json())
    assert org.alice.get("/api/v1/gang-fit/").status_code == 200
