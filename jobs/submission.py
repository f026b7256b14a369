"""Turn a team's job request into a checked, rendered job: which team and
namespace, which LocalQueue and ClusterQueue, which priority, where its pods
may go, and every policy rule of its queue class. Raises ``PolicyInvalid``
listing every broken rule; nothing is written here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Max, Q

from berth_cli import durations
from cluster.forecast import Candidate, kueue_pod_sets, never_fits, pod_sets_of
from cluster.models import CapacitySnapshot
from cluster.state import current_policy
from jobs import validation as rules
from jobs.manifests import JOB_KINDS, JobSpec, render_job
from jobs.models import JobRequest, JobState
from jobs.models.requests import TERMINAL_STATES
from jobs.placement import FlavorShape, Placement, RenderError, placement_for
from queues.access import team_ids_of, visible_team_ids
from queues.choices import CapacityType
from queues.errors import FieldError, PolicyInvalid
from queues.models import (
    ClusterQueue,
    LocalQueue,
    QueueClass,
    ResourceFlavor,
    Team,
    TeamNamespace,
    WorkloadPriorityClass,
)
from queues.quantity import QuantityError, to_canonical

GPU = "nvidia.com/gpu"
DEFAULT_RUNTIME = "torch-distributed"


@dataclass
class Prepared:
    """A request that passed every rule: what to store and what to create."""

    team: Team
    namespace: str
    local_queue: LocalQueue
    cluster_queue: ClusterQueue
    queue_class: QueueClass | None
    priority_class: str
    priority: int
    spot_allowed: bool
    max_runtime_seconds: int | None
    checkpoint_interval_seconds: int | None
    expected_runtime_seconds: int | None
    spec: JobSpec
    manifest: list[dict[str, Any]]
    candidate: Candidate

    def fields(self) -> dict[str, Any]:
        """JobRequest fields (everything but who and when)."""
        spec = self.spec
        return {
            "name": spec.name,
            "team": self.team,
            "namespace": self.namespace,
            "kind": spec.kind,
            "image": spec.image,
            "command": list(spec.command),
            "env": dict(spec.env),
            "nodes": spec.nodes,
            "gpus_per_node": spec.gpus_per_node,
            "cpu_per_node": spec.cpu_per_node_milli,
            "memory_per_node": spec.memory_per_node_bytes,
            "queue_class": self.queue_class.name if self.queue_class else "",
            "local_queue": self.local_queue.name,
            "cluster_queue": self.cluster_queue.name,
            "priority_class": self.priority_class,
            "priority": self.priority,
            "checkpoint_uri": spec.checkpoint_uri,
            "checkpoint_interval_seconds": self.checkpoint_interval_seconds,
            "max_runtime_seconds": self.max_runtime_seconds,
            "retries": spec.retries,
            "spot_allowed": self.spot_allowed,
            "labels": dict(spec.labels),
            "training_runtime": spec.training_runtime if spec.kind == "TrainJob" else "",
            "min_nodes": spec.min_nodes,
            "topology_required": spec.topology_required,
            "topology_preferred": spec.topology_preferred,
            "expected_runtime_seconds": self.expected_runtime_seconds,
            "manifest": self.manifest,
        }


def _team_and_namespace(actor: Any, data: Mapping[str, Any]) -> tuple[Team, str]:
    admin = visible_team_ids(actor) is None  # sees (and submits to) every team
    mine = team_ids_of(actor)
    slug, namespace = data.get("team") or "", data.get("namespace") or ""
    team: Team | None = None
    if slug:
        team = Team.objects.filter(slug=slug).first()
        if team is None or not (admin or team.pk in mine):
            raise PolicyInvalid.single(
                "team", "unknown-team", f"you are not a member of a team named {slug!r}"
            )
    elif namespace:
        owned = TeamNamespace.objects.filter(name=namespace).select_related("team").first()
        if owned is None or not (admin or owned.team_id in mine):
            raise PolicyInvalid.single(
                "namespace",
                "unknown-namespace",
                f"no team of yours owns namespace {namespace!r}",
            )
        team = owned.team
    else:
        teams = list(Team.objects.filter(pk__in=mine))
        if len(teams) != 1:
            raise PolicyInvalid.single(
                "team",
                "required",
                "name the team to submit for"
                + (f" (one of: {', '.join(t.slug for t in teams)})" if teams else ""),
            )
        team = teams[0]
    names = list(team.namespaces.values_list("name", flat=True))
    if namespace:
        if namespace not in names:
            raise PolicyInvalid.single(
                "namespace",
                "not-team-namespace",
                f"namespace {namespace!r} does not belong to team {team.slug}; "
                f"its namespaces are: {', '.join(names) or 'none'}",
            )
        return team, namespace
    if len(names) != 1:
        raise PolicyInvalid.single(
            "namespace",
            "required",
            f"team {team.slug} has {len(names)} namespaces; name one"
            + (f" ({', '.join(names)})" if names else ""),
        )
    return team, names[0]


def _queue(team: Team, namespace: str, wanted: str) -> LocalQueue:
    """A LocalQueue by name, or the namespace's queue of a queue class."""
    queues = list(
        LocalQueue.objects.filter(namespace__name=namespace).select_related(
            "cluster_queue__queue_class", "cluster_queue__team"
        )
    )
    available = ", ".join(sorted(q.name for q in queues)) or "none"
    if not wanted:
        raise PolicyInvalid.single(
            "queue", "required", f"name a queue or queue class; {namespace} has: {available}"
        )
    allowed = [q for q in queues if q.cluster_queue.team_id in (None, team.pk)]
    by_name = [q for q in allowed if q.name == wanted]
    if by_name:
        return by_name[0]
    of_class = [
        q
        for q in allowed
        if q.cluster_queue.queue_class is not None and q.cluster_queue.queue_class.name == wanted
    ]
    # The team's own queue of that class before a shared one.
    of_class.sort(key=lambda q: (q.cluster_queue.team_id is None, q.name))
    if of_class:
        if (
            len(of_class) > 1
            and of_class[0].cluster_queue.team_id == of_class[1].cluster_queue.team_id
        ):
            raise PolicyInvalid.single(
                "queue",
                "ambiguous-queue",
                f"namespace {namespace} has several queues of class {wanted}: "
                f"{', '.join(q.name for q in of_class)}; name one",
            )
        return of_class[0]
    raise _no_queue(team, namespace, wanted, queues, allowed)


def _queue_label(queue: LocalQueue) -> str:
    """``platform (interactive-dev)``, ``urgent (urgent-release, shared)``."""
    cluster_queue = queue.cluster_queue
    about = [cluster_queue.queue_class.name if cluster_queue.queue_class else "no class"]
    if cluster_queue.team_id is None:
        about.append("shared")
    return f"{queue.name} ({', '.join(about)})"


def _no_queue(
    team: Team, namespace: str, wanted: str, queues: list[LocalQueue], allowed: list[LocalQueue]
) -> PolicyInvalid:
    """Why ``wanted`` names no queue the team may use from ``namespace``, and
    what it could do instead."""
    yours = ", ".join(_queue_label(q) for q in sorted(allowed, key=lambda q: q.name)) or "none"
    theirs = [q for q in queues if q.name == wanted and q not in allowed]
    if theirs:
        owner = theirs[0].cluster_queue.team
        return PolicyInvalid.single(
            "queue",
            "queue-not-allowed",
            f"LocalQueue {wanted} in namespace {namespace} feeds ClusterQueue "
            f"{theirs[0].cluster_queue.name} of team {owner.slug if owner else '?'}, which team "
            f"{team.slug} may not use; your team's queues there: {yours}",
        )
    owned = ClusterQueue.objects.filter(name=wanted, team__isnull=False).exclude(team=team)
    owner_slug = owned.values_list("team__slug", flat=True).first()
    if owner_slug:
        return PolicyInvalid.single(
            "queue",
            "queue-not-allowed",
            f"queue {wanted} belongs to team {owner_slug}; team {team.slug} may not use it; "
            f"your team's queues in namespace {namespace}: {yours}",
        )
    if not QueueClass.objects.filter(name=wanted).exists():
        classes = ", ".join(QueueClass.objects.order_by("name").values_list("name", flat=True))
        return PolicyInvalid.single(
            "queue",
            "unknown-queue",
            f"namespace {namespace} has no queue {wanted!r} and there is no queue class of "
            f"that name; your team's queues there: {yours}"
            + (f"; queue classes: {classes}" if classes else ""),
        )
    usable = Q(cluster_queue__team=team) | Q(cluster_queue__team__isnull=True)
    elsewhere = sorted(
        LocalQueue.objects.filter(usable, namespace__team=team)
        .filter(cluster_queue__queue_class__name=wanted)
        .exclude(namespace__name=namespace)
        .values_list("namespace__name", "name")
    )
    if elsewhere:
        where = ", ".join(f"{ns}/{name}" for ns, name in elsewhere)
        return PolicyInvalid.single(
            "queue",
            "no-queue-of-class",
            f"namespace {namespace} has no {wanted} queue, but your team's other namespaces do: "
            f"{where}; name that namespace (namespace; --namespace in the CLI)",
        )
    shared = list(
        ClusterQueue.objects.filter(team__isnull=True, queue_class__name=wanted)
        .order_by("name")
        .values_list("name", flat=True)
    )
    if shared:
        return PolicyInvalid.single(
            "queue",
            "no-queue-of-class",
            f"team {team.slug} has no {wanted} queue; these shared ones take {wanted} jobs: "
            f"{', '.join(shared)}, but namespace {namespace} has no LocalQueue for them: ask a "
            f"platform admin to add one; your team's queues there: {yours}",
        )
    return PolicyInvalid.single(
        "queue",
        "no-queue-of-class",
        f"team {team.slug} has no {wanted} queue and no shared queue takes {wanted} jobs: "
        f"ask a platform admin for one, or submit to one of your team's queues in namespace "
        f"{namespace}: {yours}",
    )


def _priority(data: Mapping[str, Any], queue: ClusterQueue) -> tuple[str, int]:
    name = data.get("priority_class") or ""
    if not name:
        default = queue.default_priority_class or (
            queue.queue_class.default_priority_class if queue.queue_class else None
        )
        return (default.name, default.value) if default else ("", 0)
    found = WorkloadPriorityClass.objects.filter(name=name).first()
    if found is None:
        known = ", ".join(WorkloadPriorityClass.objects.values_list("name", flat=True)) or "none"
        raise PolicyInvalid.single(
            "priority_class", "unknown-reference", f"no priority class {name!r}; known: {known}"
        )
    return found.name, found.value


def _flavors(queue: ClusterQueue) -> list[ResourceFlavor]:
    """The flavors of the resource group that covers GPUs (else all), in order."""
    quotas = list(queue.quotas.select_related("flavor").order_by("group_index", "flavor_index"))
    groups = {q.group_index for q in quotas if q.resource == GPU} or {q.group_index for q in quotas}
    ordered: list[ResourceFlavor] = []
    for quota in quotas:
        if quota.group_index in groups and quota.flavor not in ordered:
            ordered.append(quota.flavor)
    return ordered


def spot_usable(queue_class: QueueClass | None, requested: bool | None = None) -> bool:
    """Whether a job may land on spot capacity: only where its queue class runs
    jobs on spot, and there unless the request says no (``spot_allowed``)."""
    class_spot = bool(queue_class and queue_class.spot_allowed)
    return class_spot if requested is None else bool(requested) and class_spot


def split_flavors(
    flavors: list[ResourceFlavor], spot: bool
) -> tuple[list[ResourceFlavor], list[ResourceFlavor]]:
    """The flavors a job may land on, and those its pods must be kept off."""
    allowed = [f for f in flavors if spot or f.capacity_type != CapacityType.SPOT]
    return allowed, [f for f in flavors if f not in allowed]


def _spot_only(queue: ClusterQueue) -> FieldError:
    queue_class = queue.queue_class
    if not spot_usable(queue_class):
        # spot_allowed cannot help: the class refuses spot whatever the request says.
        return FieldError(
            "queue",
            "spot-only-queue",
            f"ClusterQueue {queue.name} has only spot flavors and its queue class "
            f"{queue_class.name if queue_class else '(none)'} does not run jobs on spot "
            "capacity, so no job can run there; use another queue",
        )
    return FieldError(
        "spot_allowed",
        "spot-only-queue",
        f"ClusterQueue {queue.name} has only spot flavors; leave spot_allowed out or set it "
        "to true",
    )


@dataclass(frozen=True)
class QueueOffer:
    """What a job sent to a ClusterQueue may land on, spot left to its queue
    class (``spot_allowed`` unset): decided by the same steps as a submit."""

    spot: bool
    usable: list[ResourceFlavor]
    unusable: dict[str, str]  # flavor → why a job there cannot use it
    problem: str = ""  # why no job can run there at all, if so


def queue_offer(queue: ClusterQueue) -> QueueOffer:
    queue_class = queue.queue_class
    spot = spot_usable(queue_class)
    flavors = _flavors(queue)
    allowed, avoided = split_flavors(flavors, spot)
    class_name = queue_class.name if queue_class else "(none)"
    unusable = {
        f.name: f"spot capacity, and queue class {class_name} does not run jobs on spot"
        for f in avoided
    }
    problem = ""
    if flavors and not allowed:
        problem = _spot_only(queue).message
    else:
        try:
            placement_for([_shape(f) for f in allowed], [_shape(f) for f in avoided])
        except RenderError as exc:
            problem = exc.message
    return QueueOffer(
        spot=spot, usable=[] if problem else allowed, unusable=unusable, problem=problem
    )


def _shape(flavor: ResourceFlavor, gpus_per_node: int | None = None) -> FlavorShape:
    return FlavorShape(
        name=flavor.name,
        node_labels=dict(flavor.node_labels),
        node_taints=list(flavor.node_taints),
        tolerations=list(flavor.tolerations),
        spot=flavor.capacity_type == CapacityType.SPOT,
        gpus_per_node=gpus_per_node,
    )


def _render_error(exc: RenderError) -> PolicyInvalid:
    # Placement is the queue's doing, not a field of the request.
    field = "queue" if exc.field == "placement" else exc.field
    return PolicyInvalid.single(field, exc.rule, exc.message)


def largest_node_gpus(flavors: list[str]) -> dict[str, int]:
    """GPUs of the biggest node sync saw for each flavor (the default if none)."""
    newest = CapacitySnapshot.objects.filter(flavor__in=flavors, resource=GPU).aggregate(
        at=Max("at")
    )["at"]
    seen: dict[str, int] = {}
    if newest is not None:
        seen = dict(
            CapacitySnapshot.objects.filter(
                at=newest, resource=GPU, flavor__in=flavors
            ).values_list("flavor", "largest_node")
        )
    return {f: seen.get(f) or int(settings.BERTH_NODE_GPUS) for f in flavors}


def _quantity(
    data: Mapping[str, Any], field: str, resource: str, errors: list[FieldError]
) -> int | None:
    value = data.get(field)
    if value in (None, ""):
        return None
    try:
        amount = to_canonical(resource, str(value))
    except QuantityError as exc:
        errors.append(FieldError(field, "quantity", str(exc)))
        return None
    if amount <= 0:
        errors.append(FieldError(field, "minimum", "must be more than zero"))
    return amount


def _own_rules(data: Mapping[str, Any]) -> list[FieldError]:
    errors = [
        *rules.name_errors(data.get("name")),
        *rules.image_errors(data.get("image")),
        *rules.command_errors(data.get("command")),
        *rules.env_errors(data.get("env") or {}, kind=data.get("kind") or "Job"),
        *rules.label_errors(data.get("labels") or {}),
        *rules.checkpoint_errors(data.get("checkpoint_uri") or ""),
        *rules.shape_errors(
            int(data.get("nodes", 1)),
            int(data.get("gpus_per_node", 0)),
            data.get("kind", "Job"),
            JOB_KINDS,
        ),
        *rules.gang_errors(
            int(data.get("nodes", 1)),
            data.get("kind") or "Job",
            data.get("min_nodes"),
            data.get("topology_required") or "",
            data.get("topology_preferred") or "",
        ),
    ]
    return errors


def _class_rules(
    data: Mapping[str, Any], queue: ClusterQueue, queue_class: QueueClass | None
) -> tuple[list[FieldError], bool, int | None, int | None]:
    """Errors, spot allowed, max runtime and checkpoint interval under the queue class."""
    errors: list[FieldError] = []
    class_name = queue_class.name if queue_class else "(none)"
    spot_requested = data.get("spot_allowed")
    if spot_requested and not spot_usable(queue_class):
        errors.append(
            FieldError(
                "spot_allowed",
                "spot-not-allowed",
                f"queue class {class_name} does not run jobs on spot capacity",
            )
        )
    spot = spot_usable(queue_class, spot_requested)
    checkpoint = data.get("checkpoint_uri") or ""
    if not checkpoint and queue_class and queue_class.requires_checkpoint:
        errors.append(
            FieldError(
                "checkpoint_uri",
                "checkpoint-required",
                f"queue class {class_name} may preempt or reclaim its jobs at any time: "
                "give a checkpoint URI (e.g. s3://bucket/run) so work resumes",
            )
        )
    elif not checkpoint and spot:
        errors.append(
            FieldError(
                "checkpoint_uri",
                "checkpoint-required",
                "a job that may run on spot capacity needs a checkpoint URI; "
                "give one, or set spot_allowed to false",
            )
        )
    if data.get("min_nodes") is not None and queue_class and queue_class.gang_required:
        errors.append(
            FieldError(
                "min_nodes",
                "gang-required",
                f"queue class {class_name} starts all of a job's nodes together (a gang): "
                "leave min_nodes out, or use a queue class that admits part of a job",
            )
        )
    runtime = data.get("max_runtime_seconds")
    limit = queue_class.max_runtime_seconds if queue_class else None
    if runtime is not None and limit is not None and runtime > limit:
        errors.append(
            FieldError(
                "max_runtime_seconds",
                "max-runtime-above-limit",
                f"{durations.format_duration(runtime)} ({runtime} s) is more than queue class "
                f"{class_name} allows ({durations.format_duration(limit)})",
            )
        )
    retries = int(data.get("retries") or 0)
    retry_limit = queue_class.max_retries if queue_class else None
    if retry_limit is not None and retries > retry_limit:
        errors.append(
            FieldError(
                "retries",
                "retries-above-limit",
                f"{retries} retries is more than queue class {class_name} allows ({retry_limit})",
            )
        )
    if (
        queue_class
        and queue_class.requires_approval
        and not (data.get("justification") or "").strip()
    ):
        errors.append(
            FieldError(
                "justification",
                "justification-required",
                f"queue class {class_name} needs an approver's yes: say why this job is urgent",
            )
        )
    interval = data.get("checkpoint_interval_seconds")
    if checkpoint and interval is None:
        interval = int(settings.BERTH_CHECKPOINT_INTERVAL)
    return errors, spot, runtime if runtime is not None else limit, interval if checkpoint else None


def prepare(actor: Any, data: Mapping[str, Any]) -> Prepared:
    """Resolve, check and render; raises PolicyInvalid with every broken rule."""
    errors = _own_rules(data)
    team, namespace = _team_and_namespace(actor, data)
    local_queue = _queue(team, namespace, data.get("queue") or "")
    queue = local_queue.cluster_queue
    queue_class = queue.queue_class
    class_errors, spot, max_runtime, interval = _class_rules(data, queue, queue_class)
    errors.extend(class_errors)
    priority_class, priority = _priority(data, queue)
    cpu = _quantity(data, "cpu_per_node", "cpu", errors)
    memory = _quantity(data, "memory_per_node", "memory", errors)
    name = data.get("name")
    if (
        isinstance(name, str)
        and JobRequest.objects.filter(namespace=namespace, name=name)
        .exclude(state__in=TERMINAL_STATES)
        .exists()
    ):
        errors.append(
            FieldError(
                "name",
                "name-in-use",
                f"a job named {name} is still live in {namespace}; cancel it or pick another name",
            )
        )
    flavors = _flavors(queue)
    allowed, avoided = split_flavors(flavors, spot)
    if flavors and not allowed:
        errors.append(_spot_only(queue))
    gpus_per_node = int(data.get("gpus_per_node", 0))
    sizes = largest_node_gpus([f.name for f in allowed]) if allowed else {}
    if allowed and gpus_per_node > 0:
        biggest = max(sizes.values())
        if gpus_per_node > biggest:
            errors.append(
                FieldError(
                    "gpus_per_node",
                    "exceeds-node-size",
                    f"{gpus_per_node} GPUs per node, but the largest node of "
                    + ", ".join(f"{f} has {n}" for f, n in sorted(sizes.items()))
                    + "; use more nodes with fewer GPUs each",
                )
            )
    if errors:
        raise PolicyInvalid(errors)
    try:
        placement: Placement = placement_for(
            [_shape(f, sizes.get(f.name)) for f in allowed], [_shape(f) for f in avoided]
        )
    except RenderError as exc:
        raise _render_error(exc) from exc
    spec = JobSpec(
        name=data["name"],
        namespace=namespace,
        team=team.slug,
        kind=data.get("kind") or "Job",
        image=data["image"],
        command=list(data["command"]),
        nodes=int(data.get("nodes", 1)),
        gpus_per_node=gpus_per_node,
        local_queue=local_queue.name,
        priority_class=priority_class,
        queue_class=queue_class.name if queue_class else "",
        env=dict(data.get("env") or {}),
        cpu_per_node_milli=cpu,
        memory_per_node_bytes=memory,
        checkpoint_uri=data.get("checkpoint_uri") or "",
        max_runtime_seconds=max_runtime,
        retries=int(data.get("retries") or 0),
        labels=dict(data.get("labels") or {}),
        annotations=_annotations(data, interval),
        placement=placement,
        training_runtime=data.get("training_runtime") or DEFAULT_RUNTIME,
        min_nodes=data.get("min_nodes"),
        topology_required=data.get("topology_required") or "",
        topology_preferred=data.get("topology_preferred") or "",
    )
    try:
        manifest = render_job(spec)
    except RenderError as exc:
        raise _render_error(exc) from exc
    candidate = Candidate(
        name=spec.name,
        namespace=namespace,
        cluster_queue=queue.name,
        priority=priority,
        pod_sets=pod_sets_of(kueue_pod_sets(manifest[0])),
        runtime=_runtime(data.get("expected_runtime_seconds"), max_runtime),
        local_queue=local_queue.name,
    )
    raise_if_never_fits(candidate)
    return Prepared(
        team=team,
        namespace=namespace,
        local_queue=local_queue,
        cluster_queue=queue,
        queue_class=queue_class,
        priority_class=priority_class,
        priority=priority,
        spot_allowed=spot,
        max_runtime_seconds=max_runtime,
        checkpoint_interval_seconds=interval,
        expected_runtime_seconds=data.get("expected_runtime_seconds"),
        spec=spec,
        manifest=manifest,
        candidate=candidate,
    )


def _runtime(expected: int | None, maximum: int | None) -> float | None:
    """What start estimates take as the job's run time: what the team expects,
    else its limit (a job with neither runs forever as far as estimates know)."""
    chosen = expected or maximum
    return float(chosen) if chosen else None


def raise_if_never_fits(candidate: Candidate) -> None:
    errors = never_fits(current_policy(), candidate)
    if errors:
        raise PolicyInvalid(errors)


def _annotations(data: Mapping[str, Any], interval: int | None) -> dict[str, str]:
    annotations = {}
    if interval:
        annotations["berth.dev/checkpoint-interval-seconds"] = str(interval)
    runtime = data.get("expected_runtime_seconds")
    if runtime:
        # The simulated cluster "runs" the job this long; a real one ignores it.
        annotations["berth.dev/simulated-runtime-seconds"] = str(int(runtime))
    return annotations


__all__ = [
    "JobState",
    "Prepared",
    "QueueOffer",
    "largest_node_gpus",
    "prepare",
    "queue_offer",
    "split_flavors",
    "spot_usable",
]
