"""Import a live Kueue policy into Berth (``manage.py import_kueue``).

Reads Kueue's objects from the cluster or from YAML files, maps them to
Berth's policy (``queues.kueue.adopt``), stores them through the policy
services — so every rule a person's edit meets holds here too — and plans
what taking the objects over will change on the cluster. Without ``apply``
all of it runs in a transaction that is rolled back: the plan is exact (the
services' own validation, the generated LocalQueues, the rendered objects)
and nothing is stored. With ``apply`` the policy is stored with history noting
where it came from, and the imported objects are recorded as adopted: the next
reconcile takes them over with server-side apply instead of refusing them.

Objects Berth does not import are never touched: reconcile prunes only what
carries Berth's label, and an adopted object gets it only by being imported.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from django.db import transaction
from django.utils import timezone

from queues import services
from queues.backends import get_backend
from queues.backends.base import BackendError, ClusterBackend
from queues.errors import PolicyConflict, PolicyInvalid
from queues.kueue.adopt import ImportedPolicy, label, read_kueue
from queues.kueue.bundle import current_bundle
from queues.kueue.plan import Change, Plan, make_plan
from queues.kueue.render import render
from queues.kueue.served import as_served, owner_of
from queues.models import AdoptedObject, KueueReading, LocalQueue, QueueClass
from queues.reconcile import actual_objects
from queues.services.common import noted


class ImportSourceError(Exception):
    """The files or the cluster could not be read; says which and why."""


@dataclass(frozen=True)
class StoreError:
    """An imported object Berth's rules refuse: nothing of the import is stored."""

    object: str
    field: str
    message: str


@dataclass
class ImportReport:
    source: str
    policy: ImportedPolicy
    errors: list[StoreError] = field(default_factory=list)
    # Kind -> names Berth stores (or would store), generated LocalQueues included.
    stored: dict[str, list[str]] = field(default_factory=dict)
    plan: Plan | None = None
    applied: bool = False
    # Whether the plan compares against a cluster's objects (else the files').
    from_cluster: bool = True

    @property
    def takeover(self) -> list[Change]:
        return self.plan.writes if self.plan is not None else []

    def managers(self, change: Change) -> dict[str, list[str]]:
        """Field path -> its managers before the takeover, for fields Berth takes."""
        return {path: owner_of(change.actual or {}, path) for path in change.taken}


# ------------------------------------------------------------------- reading


def objects_from_files(paths: Sequence[str | os.PathLike[str]]) -> list[dict[str, Any]]:
    """Every object in the YAML files (folders are searched for .yaml/.yml);
    ``List`` objects are opened up."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml"))
        elif path.is_file():
            files.append(path)
        else:
            raise ImportSourceError(f"{path}: no such file or folder")
    objects: list[dict[str, Any]] = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ImportSourceError(f"{path}: not UTF-8 text: {exc}") from exc
        objects += objects_from_text(text, str(path))
    return objects


def objects_from_text(text: str, where: str) -> list[dict[str, Any]]:
    """Every object in one YAML text (``where`` names it in errors)."""
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise ImportSourceError(f"{where}: not valid YAML: {exc}") from exc
    objects: list[dict[str, Any]] = []
    for index, document in enumerate(documents):
        if document is None:
            continue
        if not isinstance(document, dict) or not isinstance(document.get("metadata"), dict):
            raise ImportSourceError(
                f"{where}: document {index + 1} is not a Kubernetes object "
                "(a mapping with kind and metadata)"
            )
        if document.get("kind") == "List":
            objects += [dict(item) for item in document.get("items") or []]
        else:
            objects.append(document)
    return objects


def objects_from_cluster(backend: ClusterBackend) -> list[dict[str, Any]]:
    return actual_objects(backend)


def read_for_import(reading_id: int) -> KueueReading | None:
    """Fill a reading with the configured cluster's Kueue objects (or the
    reason it could not be read)."""
    reading = KueueReading.objects.filter(pk=reading_id).first()
    if reading is None:
        return None
    try:
        backend = get_backend()
        reading.cluster = backend.name
        reading.objects_read = objects_from_cluster(backend)
        reading.error = ""
    except BackendError as exc:
        reading.objects_read, reading.error = [], f"the cluster could not be read: {exc}"
    reading.finished_at = timezone.now()
    reading.save()
    return reading


# ------------------------------------------------------------------- storing


def _errors_of(what: str, exc: PolicyInvalid | PolicyConflict) -> list[StoreError]:
    if isinstance(exc, PolicyInvalid):
        return [StoreError(what, e.field, e.message) for e in exc.errors]
    return [StoreError(what, "", str(exc))]


def _store(policy: ImportedPolicy, actor: Any) -> tuple[list[StoreError], dict[str, list[str]]]:
    errors: list[StoreError] = []
    stored: dict[str, list[str]] = {}
    steps: list[tuple[str, Any, list[dict[str, Any]], str]] = [
        ("Team", services.teams, policy.teams, "slug"),
        ("Topology", services.topologies, policy.topologies, "name"),
        ("ResourceFlavor", services.resource_flavors, policy.flavors, "name"),
        ("WorkloadPriorityClass", services.priority_classes, policy.priority_classes, "name"),
        ("Cohort", services.cohorts, policy.cohorts, "name"),
        ("ClusterQueue", services.cluster_queues, policy.cluster_queues, "name"),
    ]
    for kind, service, specs, key in steps:
        for spec in specs:
            try:
                service.create(actor=actor, data=spec)
            except (PolicyInvalid, PolicyConflict) as exc:
                errors += _errors_of(f"{kind} {spec[key]}", exc)
            else:
                stored.setdefault(kind, []).append(str(spec[key]))
    for spec in policy.local_queues:
        what = f"LocalQueue {spec['namespace']}/{spec['name']}"
        generated = LocalQueue.objects.filter(
            namespace__name=spec["namespace"], name=spec["name"]
        ).first()
        if generated is not None and generated.cluster_queue.name == spec["cluster_queue"]:
            # Berth generates this one itself (named after its queue, in a namespace
            # of the queue's team); only its stop policy may need setting.
            if generated.stop_policy != spec["stop_policy"]:
                try:
                    services.local_queues.update(
                        actor=actor, obj=generated, data={"stop_policy": spec["stop_policy"]}
                    )
                except (PolicyInvalid, PolicyConflict) as exc:
                    errors += _errors_of(what, exc)
            continue
        try:
            services.local_queues.create(actor=actor, data=spec)
        except (PolicyInvalid, PolicyConflict) as exc:
            errors += _errors_of(what, exc)
        else:
            stored.setdefault("LocalQueue", []).append(f"{spec['namespace']}/{spec['name']}")
    generated_names = LocalQueue.objects.filter(generated=True).select_related("namespace")
    for queue in generated_names:
        stored.setdefault("LocalQueue", []).append(f"{queue.namespace.name}/{queue.name}")
    stored["LocalQueue"] = sorted(set(stored.get("LocalQueue", [])))
    return errors, stored


class _RolledBack(Exception):
    pass


def import_kueue(
    objects: Iterable[Mapping[str, Any]],
    *,
    actor: Any,
    source: str,
    apply: bool = False,
    actual: Iterable[Mapping[str, Any]] | None = None,
    team_label: str | None = None,
    classes: Mapping[str, str] | None = None,
    skip: Iterable[str] = (),
    manual: Mapping[str, str] | None = None,
) -> ImportReport:
    """Plan (and with ``apply`` store) the import of ``objects``. ``actual``:
    the cluster's objects to plan the takeover against (None: ``objects``
    themselves, as if the files were applied). Stores nothing when the plan
    has errors."""
    objects = [dict(obj) for obj in objects]
    known = dict(QueueClass.objects.values_list("name", "requires_approval"))
    policy = read_kueue(
        objects,
        team_label=team_label,
        classes=classes,
        known_classes=known,
        approval_classes=[name for name, approval in known.items() if approval],
        skip=skip,
    )
    report = ImportReport(source=source, policy=policy, from_cluster=actual is not None)
    try:
        with transaction.atomic():
            with noted(source):
                report.errors, report.stored = _store(policy, actor)
            adopted = set(policy.adopted) | set(
                AdoptedObject.objects.values_list("kind", "namespace", "name")
            )
            report.plan = make_plan(
                render(current_bundle()),
                [dict(obj) for obj in actual]
                if actual is not None
                else [as_served(obj) for obj in objects],
                manual=manual,
                adopt=adopted,
            )
            if not apply or report.errors:
                raise _RolledBack
            for kind, namespace, name in policy.adopted:
                source_obj = policy.sources.get((kind, namespace, name), {})
                managers = sorted(
                    {
                        str(entry.get("manager", "?"))
                        for entry in source_obj.get("metadata", {}).get("managedFields") or []
                    }
                )
                AdoptedObject.objects.update_or_create(
                    kind=kind,
                    namespace=namespace,
                    name=name,
                    defaults={"source": source[:500], "managers": managers},
                )
            report.applied = True
    except _RolledBack:
        pass
    return report


def describe(report: ImportReport) -> list[str]:
    """The report as lines a person reads, most important first."""
    policy = report.policy
    lines = [f"Import {'applied' if report.applied else 'plan'}: {report.source}"]
    if report.errors:
        lines.append("")
        lines.append(f"Cannot import ({len(report.errors)}); nothing is stored until fixed:")
        lines += [
            f"  {e.object}: {e.field + ': ' if e.field else ''}{e.message}" for e in report.errors
        ]
    lines.append("")
    lines.append("Berth stores:" if report.applied else "Berth would store:")
    for kind in ("Team", "Topology", "ResourceFlavor", "WorkloadPriorityClass", "Cohort"):
        names = report.stored.get(kind, [])
        if names:
            lines.append(f"  {kind} ({len(names)}): {', '.join(names)}")
    for queue in policy.cluster_queues:
        if queue["name"] in report.stored.get("ClusterQueue", []):
            owner = f"team {queue['team']}" if queue["team"] else "shared"
            lines.append(
                f"  ClusterQueue {queue['name']} ({owner}, cohort {queue['cohort'] or '-'}, "
                f"class {queue['queue_class'] or '-'})"
            )
    local = report.stored.get("LocalQueue", [])
    if local:
        lines.append(f"  LocalQueue ({len(local)}): {', '.join(local)}")
    if policy.guesses:
        lines.append("")
        lines.append("Queue classes (confirm, or choose with --class QUEUE=CLASS, '' for none):")
        lines += [f"  {g.queue}: {g.queue_class or '(none)'} — {g.why}" for g in policy.guesses]
    lines.append("")
    if policy.dropped:
        lines.append(
            f"Berth cannot represent ({len(policy.dropped)}): each stays on the cluster as it "
            "is, under its manager, but Berth's policy, what-if and estimates do not know it:"
        )
        lines += [f"  {d.kind} {d.name}: {d.field} = {d.value!r} — {d.why}" for d in policy.dropped]
    else:
        lines.append("Berth can represent every field it read.")
    if policy.skipped:
        lines.append("")
        lines.append("Not imported, left as they are (never pruned):")
        lines += [f"  {s.kind} {s.name}: {s.why}" for s in policy.skipped]
    lines.append("")
    lines += takeover_lines(report)
    return lines


def _berths_mark(path: str) -> bool:
    """Berth's labels and annotations on an object it takes over."""
    return path in ("metadata.labels", "metadata.annotations") or path.startswith(
        ("metadata.labels.", "metadata.annotations.")
    )


def takeover_lines(report: ImportReport) -> list[str]:
    writes = report.takeover
    where = "the cluster" if report.from_cluster else "a cluster holding these files"
    if not writes:
        return [f"Taking over changes nothing on {where}; a reconcile then writes nothing."]
    lines = [
        f"Taking over writes {len(writes)} object(s) on {where} (the next reconcile does it); "
        "after that a reconcile writes nothing:"
    ]
    for change in writes:
        name = label((change.kind, change.namespace, change.name))
        if change.action == "create":
            lines.append(f"  create {name} (Berth's model implies it)")
            continue
        added = [f for f in change.fields if f not in change.taken and not _berths_mark(f)]
        detail = "labels it as Berth's" + (f"; adds {', '.join(added)}" if added else "")
        lines.append(f"  update {name}: {detail}")
        if "spec.namespaceSelector" in change.fields:
            before = (change.actual or {}).get("spec", {}).get("namespaceSelector")
            lines.append(
                f"    its namespaceSelector becomes Berth's, by the label berth.dev/team this "
                f"import sets on the team's namespaces (was {before!r}): a namespace of no "
                "team no longer uses the queue"
            )
        for path, managers in report.managers(change).items():
            before = (
                "owned by " + ", ".join(managers)
                if managers
                else "its manager unknown: files carry none"
                if not report.from_cluster
                else "owned by no manager"
            )
            lines.append(f"    takes over {path} ({before}): its value changes")
    return lines
