"""Writes for LocalQueues, including the ones Berth generates.

Berth keeps one generated LocalQueue, named after the ClusterQueue, in every
namespace that may use that ClusterQueue: the owning team's namespaces, or every
team namespace for a shared queue. An admin may add LocalQueues by hand or
repoint a generated one, which makes it manual; manual ones are never touched
by generation.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from queues import rules, snapshots
from queues.choices import ChangeAction, PolicyKind, StopPolicy
from queues.errors import FieldError, PolicyConflict
from queues.models import ClusterQueue, LocalQueue, TeamNamespace
from queues.services.common import (
    choice_errors,
    immutable_errors,
    record_change,
    required_errors,
    resolve,
)
from queues.services.kinds import PolicyKindService, save_fields

DEFAULTS: dict[str, Any] = {
    "namespace": None,
    "name": None,
    "cluster_queue": None,
    "stop_policy": StopPolicy.NONE.value,
    "generated": False,
}


def _record(
    actor: Any,
    queue: LocalQueue,
    action: ChangeAction,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
) -> None:
    record_change(
        actor=actor,
        kind=PolicyKind.LOCAL_QUEUE,
        object_name=str(queue),
        action=action,
        before=before,
        after=after,
    )


def sync_generated_local_queues(actor: Any) -> None:
    """Create the generated LocalQueues that are missing and delete the ones no
    longer implied by teams and ClusterQueues. Called inside the policy lock."""
    namespaces = list(TeamNamespace.objects.all())
    by_team: dict[int, list[TeamNamespace]] = {}
    for namespace in namespaces:
        by_team.setdefault(namespace.team_id, []).append(namespace)
    desired: dict[tuple[int, str], int] = {}
    for queue_id, name, team_id in ClusterQueue.objects.values_list("pk", "name", "team_id"):
        for namespace in namespaces if team_id is None else by_team.get(team_id, []):
            desired[(namespace.pk, name)] = queue_id
    existing = dict(
        ((namespace_id, name), generated)
        for namespace_id, name, generated in LocalQueue.objects.values_list(
            "namespace_id", "name", "generated"
        )
    )
    by_pk = {ns.pk: ns for ns in namespaces}
    # An existing key is either generated already or an admin's own LocalQueue
    # that takes the name; both stay.
    for namespace_id, name in sorted(desired.keys() - existing.keys()):
        created = LocalQueue.objects.create(
            namespace=by_pk[namespace_id],
            name=name,
            cluster_queue_id=desired[(namespace_id, name)],
            generated=True,
        )
        _record(actor, created, ChangeAction.CREATED, None, snapshots.local_queue(created))
    stale = {key for key, generated in existing.items() if generated and key not in desired}
    if stale:
        candidates = LocalQueue.objects.select_related("namespace", "cluster_queue").filter(
            generated=True, namespace_id__in={namespace_id for namespace_id, _ in stale}
        )
        remove_generated_local_queues(
            actor, [lq for lq in candidates if (lq.namespace_id, lq.name) in stale]
        )


def remove_generated_local_queues(actor: Any, queues: Iterable[LocalQueue]) -> None:
    for queue in queues:
        before = snapshots.local_queue(queue)
        queue.delete()
        _record(actor, queue, ChangeAction.DELETED, before, None)


def _validate(spec: dict[str, Any], existing: LocalQueue | None) -> list[FieldError]:
    errors = required_errors(spec, ["namespace", "name", "cluster_queue"])
    if errors:
        return errors
    errors += rules.name_errors("name", spec["name"], kind="label")
    errors += choice_errors("stop_policy", spec["stop_policy"], StopPolicy)
    namespace = TeamNamespace.objects.filter(name=spec["namespace"]).first()
    if namespace is None:
        errors.append(
            FieldError(
                "namespace",
                "unknown-namespace",
                f"{spec['namespace']!r} belongs to no team; add it to a team's namespaces first",
            )
        )
    queue = resolve(ClusterQueue, "cluster_queue", spec["cluster_queue"], errors)
    if existing is not None:
        errors += immutable_errors(
            "namespace",
            existing.namespace.name,
            spec["namespace"],
            "create a LocalQueue in the other namespace instead",
        )
        errors += immutable_errors(
            "name", existing.name, spec["name"], "Kubernetes object names are fixed"
        )
    elif LocalQueue.objects.filter(namespace__name=spec["namespace"], name=spec["name"]).exists():
        errors.append(
            FieldError(
                "name",
                "unique",
                f"namespace {spec['namespace']!r} already has a local queue named {spec['name']!r}",
            )
        )
    if (
        namespace is not None
        and queue is not None
        and queue.team_id not in (None, namespace.team_id)
    ):
        errors.append(
            FieldError(
                "cluster_queue",
                "namespace-not-admitted",
                f"cluster queue {queue.name!r} belongs to team {queue.team}, which does "
                f"not own namespace {namespace.name!r}; Kueue would never admit its jobs",
            )
        )
    return errors


def _write(spec: dict[str, Any], existing: LocalQueue | None, actor: Any) -> LocalQueue:
    fields = {
        "namespace": TeamNamespace.objects.get(name=spec["namespace"]),
        "name": spec["name"],
        "cluster_queue": ClusterQueue.objects.get(name=spec["cluster_queue"]),
        "stop_policy": spec["stop_policy"],
        # An admin's edit takes the queue out of generation's hands.
        "generated": False,
    }
    return save_fields(existing or LocalQueue(), fields, list(fields), is_new=existing is None)


def _delete_blocker(queue: LocalQueue) -> PolicyConflict | None:
    if not queue.generated:
        return None
    return PolicyConflict(
        f"local queue {queue} is generated for cluster queue {queue.cluster_queue.name!r}, "
        "which serves that namespace; it would come back. Repoint it (PATCH cluster_queue) or "
        "change the cluster queue's team instead",
        "generated",
    )


local_queues: PolicyKindService[LocalQueue] = PolicyKindService(
    kind=PolicyKind.LOCAL_QUEUE,
    defaults=DEFAULTS,
    snapshot=snapshots.local_queue,
    validate=_validate,
    write=_write,
    delete_blocker=_delete_blocker,
    object_name=str,
)
