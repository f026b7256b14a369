"""Reading workloads from a scenario: the explicit ``workloads:`` list, including
state snapshots of workloads that already hold quota.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queues import names
from queues.engine.model import CheckState, ClusterQueue, PodSet, Policy, Toleration, Workload
from queues.engine.reading import Reader, read_labels, read_seconds, read_tolerations
from queues.engine.topology import TopologyRequest
from queues.quantity import QuantityError, to_canonical

WORKLOAD_FIELDS = (
    "name",
    "namespace",
    "clusterQueue",
    "priority",
    "creationTime",
    "runtime",
    "checkpointInterval",
    "maximumExecutionTimeSeconds",
    "podsReadyAfter",
    "localQueue",
    "podSets",
    "admission",
    "admittedAt",
    "topologyAssignment",
    "admissionChecks",
)
POD_SET_FIELDS = (
    "name",
    "count",
    "minCount",
    "requests",
    "nodeSelector",
    "tolerations",
    "topologyRequest",
)


def read_priority(reader: Reader, path: str, value: Any, priorities: Mapping[str, int]) -> int:
    """A number, or the name of a workloadPriorityClass. Missing means 0."""
    if value is None:
        return 0
    if isinstance(value, str):
        if value not in priorities:
            reader.error(
                path, "unknown-priority-class", f"no workloadPriorityClass named {value!r}"
            )
            return 0
        return priorities[value]
    number = reader.integer(path, value, 0)
    return number if number is not None else 0


def read_requests(reader: Reader, path: str, raw: Any) -> dict[str, int]:
    requests: dict[str, int] = {}
    if not isinstance(raw, Mapping) or not raw:
        reader.error(path, "required", "must give at least one resource request")
        return requests
    for resource, amount in raw.items():
        problem = names.qualified_name_error(resource)
        if problem:
            reader.error(f"{path}.{resource}", "resource-name", problem)
            continue
        try:
            value = to_canonical(resource, amount)
        except QuantityError as exc:
            reader.error(f"{path}.{resource}", f"quantity-{exc.rule}", str(exc))
            continue
        if value < 0:
            reader.error(f"{path}.{resource}", "non-negative", "must be 0 or more")
            continue
        requests[resource] = value
    return requests


def read_topology_request(reader: Reader, path: str, raw: Any) -> TopologyRequest | None:
    """Kueue's ``topologyRequest``: ``required`` or ``preferred``, a level's node label."""
    block = reader.mapping(path, raw, ("required", "preferred"))
    if not block:
        return None
    if len(block) != 1:
        reader.error(path, "one-of", "give either required or preferred, not both")
        return None
    ((kind, level),) = block.items()
    if not isinstance(level, str) or not level:
        reader.error(f"{path}.{kind}", "required", "must name a topology level's node label")
        return None
    return TopologyRequest(level, required=kind == "required")


def read_topology_assignment(
    reader: Reader, path: str, raw: Any, pod_sets: tuple[PodSet, ...]
) -> dict[str, dict[str, int]] | None:
    """Where a snapshot's pods run: ``{podSet: {node: pods}}``."""
    if raw is None:
        return None
    block = reader.mapping(path, raw, tuple(p.name for p in pod_sets))
    found: dict[str, dict[str, int]] = {}
    for pod_set, nodes in block.items():
        if not isinstance(nodes, Mapping):
            reader.error(f"{path}.{pod_set}", "type", "must map node names to pod counts")
            continue
        for node, pods in nodes.items():
            if isinstance(pods, bool) or not isinstance(pods, int) or pods < 1:
                reader.error(f"{path}.{pod_set}.{node}", "range", "must be a count of pods")
                continue
            found.setdefault(pod_set, {})[str(node)] = pods
    return found


def read_pod_sets(reader: Reader, path: str, raw: Any) -> tuple[PodSet, ...]:
    items = reader.items(path, raw)
    if not items:
        reader.error(path, "required", "must list at least one pod set")
    pod_sets: list[PodSet] = []
    for i, entry in enumerate(items):
        item_path = f"{path}[{i}]"
        spec = reader.mapping(item_path, entry, POD_SET_FIELDS)
        name = reader.name(f"{item_path}.name", spec.get("name", "main"), kind="label")
        count = reader.integer(f"{item_path}.count", spec.get("count", 1), 1)
        if count is not None and count < 1:
            reader.error(f"{item_path}.count", "range", "must be at least 1")
        if any(p.name == name for p in pod_sets):
            reader.error(f"{item_path}.name", "duplicate", f"pod set {name!r} is listed twice")
        tolerations: tuple[Toleration, ...] = read_tolerations(
            reader, f"{item_path}.tolerations", spec.get("tolerations")
        )
        min_count = reader.integer(f"{item_path}.minCount", spec.get("minCount"))
        if min_count is not None and not 1 <= min_count <= max(count or 1, 1):
            reader.error(
                f"{item_path}.minCount", "range", "must be at least 1 and at most the count"
            )
            min_count = None
        if min_count is not None and any(p.min_count is not None for p in pod_sets):
            reader.error(
                f"{item_path}.minCount", "one-min-count", "at most one pod set can use minCount"
            )
            min_count = None
        pod_sets.append(
            PodSet(
                name=name,
                count=max(count or 1, 1),
                requests=read_requests(reader, f"{item_path}.requests", spec.get("requests")),
                node_selector=read_labels(
                    reader, f"{item_path}.nodeSelector", spec.get("nodeSelector")
                ),
                tolerations=tolerations,
                min_count=min_count,
                topology_request=read_topology_request(
                    reader, f"{item_path}.topologyRequest", spec.get("topologyRequest")
                ),
            )
        )
    return tuple(pod_sets)


def read_admission(
    reader: Reader,
    path: str,
    raw: Any,
    pod_sets: tuple[PodSet, ...],
    queue_name: str,
    policy: Policy,
) -> dict[str, dict[str, str]] | None:
    """``{podSet: {resource: flavor}}``: the workload already holds that quota."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        reader.error(path, "type", "must map each pod set to {resource: flavor}")
        return None
    queue = policy.cluster_queues.get(queue_name)
    offered: dict[str, set[str]] = {}
    if queue is not None:
        for group in queue.resource_groups:
            for fq in group.flavors:
                for resource in group.covered_resources:
                    offered.setdefault(resource, set()).add(fq.flavor)
    admission: dict[str, dict[str, str]] = {}
    by_name = {p.name: p for p in pod_sets}
    for pod_set_name, flavors in raw.items():
        ps_path = f"{path}.{pod_set_name}"
        pod_set = by_name.get(pod_set_name)
        if pod_set is None:
            reader.error(
                ps_path, "unknown-pod-set", f"the workload has no pod set {pod_set_name!r}"
            )
            continue
        if not isinstance(flavors, Mapping):
            reader.error(ps_path, "type", "must map each resource to a flavor")
            continue
        _check_flavors(reader, ps_path, pod_set, flavors, offered, queue, policy)
        admission[pod_set_name] = {str(r): str(f) for r, f in flavors.items()}
        if queue is not None and "pods" in offered and "pods" not in admission[pod_set_name]:
            # Kueue records pods = count whenever the queue covers pods; it comes
            # from the flavor its resource group gave the pod set's other resources.
            group = next(g for g in queue.resource_groups if "pods" in g.covered_resources)
            same_group = [
                f for r, f in admission[pod_set_name].items() if r in group.covered_resources
            ]
            if same_group:
                admission[pod_set_name]["pods"] = same_group[0]
            else:
                reader.error(
                    ps_path,
                    "incomplete-admission",
                    "gives no flavor for pods, which the cluster queue covers",
                )
    absent = sorted(set(by_name) - set(admission))
    if absent:
        reader.error(
            path, "incomplete-admission", f"gives no flavors for pod set(s) {', '.join(absent)}"
        )
    return admission


def _check_flavors(
    reader: Reader,
    ps_path: str,
    pod_set: PodSet,
    flavors: Mapping[Any, Any],
    offered: dict[str, set[str]],
    queue: ClusterQueue | None,
    policy: Policy,
) -> None:
    """One pod set's ``{resource: flavor}``: each resource requested, each flavor
    defined and in the queue's quota for it, and every request given a flavor."""
    for resource, flavor in flavors.items():
        if resource not in pod_set.requests and not (resource == "pods" and "pods" in offered):
            reader.error(
                f"{ps_path}.{resource}",
                "unknown-resource",
                f"pod set {pod_set.name!r} requests no {resource!r}",
            )
        elif flavor not in policy.flavors:
            reader.error(
                f"{ps_path}.{resource}",
                "unknown-flavor",
                f"no resource flavor named {flavor!r}",
            )
        elif queue is not None and flavor not in offered.get(resource, set()):
            reader.error(
                f"{ps_path}.{resource}",
                "flavor-not-in-queue",
                f"cluster queue {queue.name!r} has no quota for {resource} in flavor {flavor!r}",
            )
    missing = sorted(set(pod_set.requests) - set(flavors))
    if missing:
        reader.error(ps_path, "incomplete-admission", f"gives no flavor for {', '.join(missing)}")


def read_check_states(
    reader: Reader,
    path: str,
    raw: Any,
    queue_name: str,
    policy: Policy,
    admission: dict[str, dict[str, str]] | None,
) -> tuple[dict[str, CheckState], dict[str, float]]:
    """States of the admission checks that apply to the workload's admission (a
    check limited ``onFlavors`` applies only if one of those flavors is
    assigned), and the requeueAfterSeconds a check asked for."""
    admitted = admission is not None
    queue = policy.cluster_queues.get(queue_name)
    used = {f for flavors in (admission or {}).values() for f in flavors.values()}
    expected = {
        name: on_flavors
        for name, on_flavors in (queue.admission_checks if queue is not None else {}).items()
        if not on_flavors or not admitted or used & set(on_flavors)
    }
    states: dict[str, CheckState] = {}
    retry_after: dict[str, float] = {}
    every_check = tuple(queue.admission_checks) if queue is not None else ()
    given = reader.mapping(path, raw, every_check) if raw is not None else {}
    for name in expected:
        state = given.get(name, "Pending" if admitted else None)
        if state is None:
            continue
        if isinstance(state, Mapping):  # {state, requeueAfterSeconds}, as a check states it
            block = reader.mapping(f"{path}.{name}", state, ("state", "requeueAfterSeconds"))
            state = block.get("state")
            after = reader.integer(
                f"{path}.{name}.requeueAfterSeconds", block.get("requeueAfterSeconds")
            )
            if after is not None and after < 0:
                reader.error(
                    f"{path}.{name}.requeueAfterSeconds", "non-negative", "must be 0 or more"
                )
            elif after is not None:
                retry_after[name] = float(after)
        states[name] = reader.choice(f"{path}.{name}", state, CheckState, CheckState.PENDING)
    if raw is not None and not admitted:
        reader.error(
            path,
            "needs-admission",
            "check states only apply to a workload that holds quota (admission)",
        )
    return states, retry_after


def parse_workload(
    reader: Reader, path: str, entry: Any, policy: Policy, priorities: Mapping[str, int]
) -> Workload | None:
    spec = reader.mapping(path, entry, WORKLOAD_FIELDS)
    if not spec:
        return None
    name = reader.name(f"{path}.name", spec.get("name"))
    namespace = reader.name(f"{path}.namespace", spec.get("namespace", "default"), kind="label")
    queue_name = spec.get("clusterQueue")
    if not isinstance(queue_name, str):
        reader.error(f"{path}.clusterQueue", "required", "must name the workload's cluster queue")
        queue_name = ""
    elif queue_name not in policy.cluster_queues:
        reader.error(
            f"{path}.clusterQueue",
            "unknown-cluster-queue",
            f"no cluster queue named {queue_name!r}",
        )
    pod_sets = read_pod_sets(reader, f"{path}.podSets", spec.get("podSets", [{}]))
    admission = read_admission(
        reader, f"{path}.admission", spec.get("admission"), pod_sets, queue_name, policy
    )
    creation = reader.number(f"{path}.creationTime", spec.get("creationTime"), minimum=None)
    admitted_at = reader.number(f"{path}.admittedAt", spec.get("admittedAt"), minimum=None)
    if admitted_at is not None and admission is None:
        reader.error(
            f"{path}.admittedAt",
            "needs-admission",
            "only a workload with an admission has an admission time",
        )
    workload = Workload(
        name=name,
        namespace=namespace,
        cluster_queue=queue_name,
        pod_sets=pod_sets,
        priority=read_priority(reader, f"{path}.priority", spec.get("priority"), priorities),
        creation_time=creation if creation is not None else float("-inf"),
        runtime=read_seconds(reader, f"{path}.runtime", spec.get("runtime")),
        checkpoint_interval=read_seconds(
            reader, f"{path}.checkpointInterval", spec.get("checkpointInterval")
        ),
        max_execution_time=read_seconds(
            reader, f"{path}.maximumExecutionTimeSeconds", spec.get("maximumExecutionTimeSeconds")
        ),
        pods_ready_after=read_seconds(reader, f"{path}.podsReadyAfter", spec.get("podsReadyAfter"))
        or 0.0,
        local_queue=str(spec.get("localQueue") or ""),
        admission=admission,
        admitted_at=admitted_at if admission is not None else None,
        topology_assignment=read_topology_assignment(
            reader, f"{path}.topologyAssignment", spec.get("topologyAssignment"), pod_sets
        )
        if admission is not None
        else None,
    )
    workload.check_states, workload.check_retry_after = read_check_states(
        reader,
        f"{path}.admissionChecks",
        spec.get("admissionChecks"),
        queue_name,
        policy,
        admission,
    )
    return workload
