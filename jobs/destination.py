"""Where a job request goes: its team and namespace (the user's own, unless
an admin), the LocalQueue it names or the one its queue class picks (the
team's, else a shared one), and its priority. Each refusal names the field
and says what the user may choose instead."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db.models import Q

from queues.access import team_ids_of, visible_team_ids
from queues.errors import FieldError, HiddenRefusal, PolicyInvalid
from queues.models import (
    ClusterQueue,
    LocalQueue,
    QueueClass,
    Team,
    TeamNamespace,
    WorkloadPriorityClass,
)


def team_and_namespace(actor: Any, data: Mapping[str, Any]) -> tuple[Team, str]:
    admin = visible_team_ids(actor) is None  # sees (and submits to) every team
    mine = team_ids_of(actor)
    slug, namespace = data.get("team") or "", data.get("namespace") or ""
    team: Team | None = None
    if slug:
        team = Team.objects.filter(slug=slug).first()
        if team is None or not (admin or team.pk in mine):
            unknown = FieldError(
                "team", "unknown-team", f"you are not a member of a team named {slug!r}"
            )
            if team is None:
                raise PolicyInvalid([unknown])
            raise HiddenRefusal(unknown, f"submit a job for team {slug}: not a member")
    elif namespace:
        owned = TeamNamespace.objects.filter(name=namespace).select_related("team").first()
        if owned is None or not (admin or owned.team_id in mine):
            unknown = FieldError(
                "namespace", "unknown-namespace", f"no team of yours owns namespace {namespace!r}"
            )
            if owned is None:
                raise PolicyInvalid([unknown])
            raise HiddenRefusal(
                unknown, f"submit a job into namespace {namespace}: not a member of its team"
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


def choose_queue(team: Team, namespace: str, wanted: str) -> LocalQueue:
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


def priority_of(data: Mapping[str, Any], queue: ClusterQueue) -> tuple[str, int]:
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
