"""Reconcile: make the cluster hold what the policy in Postgres says.

Desired (render the policy) against actual (list every object of the kinds
Berth renders) gives a plan; applying the plan creates and updates what
differs, repairs hand edits (recorded as drift), drains and deletes what is no
longer wanted (see ``queues.kueue.plan`` for the safety rules). One reconciler
at a time (an advisory lock); every run is recorded. Transient API errors are
retried with backoff; an object the server refuses is recorded with the
server's message and does not stop the others.

Kueue's manager ConfigMap is applied only where the backend says it may
(``writes_kueue_manager_config``: the embedded cluster); elsewhere it is a
``manual`` change in the plan, never written, read or pruned.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, TypeVar

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from queues.backends import configured_backend_writes_kueue_manager_config, get_backend
from queues.backends.base import (
    POLICY_KINDS,
    TYPES,
    BackendError,
    ClusterBackend,
    KueueNotInstalled,
)
from queues.backends.retry import with_retries
from queues.kueue import manager_config
from queues.kueue.bundle import current_bundle
from queues.kueue.plan import (
    CONFLICT,
    CREATE,
    DELETE,
    DRAIN,
    MANUAL,
    UPDATE,
    Change,
    Plan,
    make_plan,
    satisfies,
)
from queues.kueue.render import KUEUE_VERSION, MANUAL_STEP, render
from queues.locks import try_lock
from queues.models import AdoptedObject, DriftRecord, PolicyChange, ReconcileRun

log = logging.getLogger(__name__)
T = TypeVar("T")
LOCK = "berth.reconcile"
# Passes in one run when the policy keeps changing while it applies.
MAX_PASSES = 3


def policy_version() -> int:
    return PolicyChange.objects.aggregate(v=Max("id"))["v"] or 0


def applied_policy_version() -> int:
    """The policy version the newest successful (or partial) apply rendered; -1
    when nothing was ever applied."""
    run = (
        ReconcileRun.objects.filter(
            dry_run=False,
            status__in=[ReconcileRun.Status.SUCCEEDED, ReconcileRun.Status.PARTIAL],
        )
        .order_by("-pk")
        .first()
    )
    return run.policy_version if run else -1


def recover_lost_runs() -> int:
    """Close runs a lost worker left RUNNING. Only when nobody holds the
    reconcile lock: a live reconciler's run is never touched (a killed worker's
    database session, and with it its advisory lock, is gone)."""
    with try_lock(LOCK) as taken:
        if not taken:
            return 0
        return ReconcileRun.objects.filter(status=ReconcileRun.Status.RUNNING).update(
            status=ReconcileRun.Status.FAILED,
            finished_at=timezone.now(),
            message="the worker running it was lost (killed or restarted); "
            "the sweeper queued a new run",
        )


def desired_objects() -> list[dict[str, Any]]:
    return render(current_bundle())


def manual_steps(writes_kueue_manager_config: bool) -> dict[str, str]:
    """Kind -> instructions, for what a person applies on this kind of cluster."""
    if writes_kueue_manager_config:
        return {}
    return {"ConfigMap": manager_config.MANUAL_STEP}


def configured_manual_steps() -> dict[str, str]:
    return manual_steps(configured_backend_writes_kueue_manager_config())


def manifest_objects() -> list[dict[str, Any]]:
    """The rendered bundle as the configured cluster takes it: what a person
    applies by hand there carries ``berth.dev/manual-step`` saying how (and the
    YAML form writes it as comments, so applying the file never applies it)."""
    steps = configured_manual_steps()
    objects = desired_objects()
    for obj in objects:
        note = steps.get(obj["kind"])
        if note:
            obj["metadata"].setdefault("annotations", {})[MANUAL_STEP] = note
    return objects


class _Calls:
    """Cluster calls of one run, retried when the error is transient (reads too:
    one 503 on a list must not fail the run), and counted."""

    def __init__(self, retry_base: float | None = None) -> None:
        self.base = float(
            retry_base if retry_base is not None else settings.BERTH_RECONCILE_RETRY_BASE
        )
        self.writes = 0
        self.retries = 0

    def _retried(self, exc: BackendError) -> None:
        self.retries += 1
        log.warning("retrying after a transient error: %s", exc)

    def read(self, fn: Callable[[], T]) -> T:
        return with_retries(fn, base=self.base, on_retry=self._retried)

    def write(self, fn: Callable[[], T]) -> T:
        def counted() -> T:
            self.writes += 1
            return fn()

        return with_retries(counted, base=self.base, on_retry=self._retried)


def actual_objects(backend: ClusterBackend, calls: _Calls | None = None) -> list[dict[str, Any]]:
    calls = calls or _Calls()
    objects: list[dict[str, Any]] = []
    for kind in POLICY_KINDS:
        items, _ = calls.read(partial(backend.list, TYPES[kind]))
        objects.extend(items)
    if backend.writes_kueue_manager_config:
        # One object by name, not a list: Berth has no business with other ConfigMaps.
        found = calls.read(
            partial(backend.get, TYPES["ConfigMap"], manager_config.NAME, manager_config.NAMESPACE)
        )
        if found is not None:
            objects.append(found)
    return objects


def adopted_identities() -> set[tuple[str, str, str]]:
    """Objects an import took into the policy: taken over, not refused."""
    return set(AdoptedObject.objects.values_list("kind", "namespace", "name"))


def compute_plan(backend: ClusterBackend, calls: _Calls | None = None) -> Plan:
    return make_plan(
        desired_objects(),
        actual_objects(backend, calls),
        manual=manual_steps(backend.writes_kueue_manager_config),
        adopt=adopted_identities(),
    )


def _drain_body(change: Change) -> dict[str, Any]:
    """Berth's own fields as the cluster holds them, with stopPolicy HoldAndDrain:
    apply must repeat everything Berth owns, or it would drop those fields."""
    actual = change.actual or {}
    metadata = actual.get("metadata", {})
    body_metadata = {"name": metadata.get("name"), "labels": metadata.get("labels", {})}
    if metadata.get("namespace"):
        body_metadata["namespace"] = metadata["namespace"]
    spec = dict(actual.get("spec") or {})
    spec["stopPolicy"] = "HoldAndDrain"
    return {
        "apiVersion": actual["apiVersion"],
        "kind": actual["kind"],
        "metadata": body_metadata,
        "spec": spec,
    }


def _versioned(body: Mapping[str, Any], version: str | None) -> dict[str, Any]:
    metadata = {k: v for k, v in body["metadata"].items() if k != "resourceVersion"}
    if version:
        metadata["resourceVersion"] = version
    return {**body, "metadata": metadata}


def _apply_update(
    backend: ClusterBackend, change: Change, body: dict[str, Any], calls: _Calls
) -> None:
    """Apply an update on the resourceVersion the plan saw. A timed-out attempt
    the server finishes late then fails its precondition instead of undoing a
    newer write; on a 409 Berth re-reads the object: done if it already holds
    the intent, else it retries on the fresh version."""
    version = [(change.actual or {}).get("metadata", {}).get("resourceVersion")]
    rtype = TYPES[change.kind]

    def attempt() -> None:
        try:
            backend.apply(_versioned(body, version[0]), force=True)
        except BackendError as exc:
            if exc.status != 409:
                raise
            current = backend.get(rtype, change.name, change.namespace or None)
            if current is not None and satisfies(body, current):
                return
            version[0] = (current or {}).get("metadata", {}).get("resourceVersion")
            raise BackendError(str(exc), status=409, reason=exc.reason, transient=True) from exc

    calls.write(attempt)


def _execute(backend: ClusterBackend, change: Change, calls: _Calls) -> None:
    rtype = TYPES[change.kind]
    namespace = change.namespace or None
    if change.recreate:
        # The API server would refuse the update (an immutable field): replace it.
        assert change.desired is not None
        desired = change.desired
        calls.write(lambda: backend.delete(rtype, change.name, namespace))
        calls.write(lambda: backend.apply(desired, force=True))
    elif change.action == CREATE or (change.action == UPDATE and not change.force):
        assert change.desired is not None
        desired = change.desired
        calls.write(lambda: backend.apply(desired, force=change.force))
    elif change.action == UPDATE:
        assert change.desired is not None
        _apply_update(backend, change, change.desired, calls)
    elif change.action == DRAIN:
        _apply_update(backend, change, _drain_body(change), calls)
    elif change.action == DELETE:
        calls.write(lambda: backend.delete(rtype, change.name, namespace))


def _dry_run_plan(backend: ClusterBackend, plan: Plan, run: ReconcileRun) -> None:
    """Send each create/update/drain to the server as a dry run (nothing is
    persisted): the plan then also shows what the API server would refuse
    (schema, CEL rules, webhooks) before anyone applies it."""
    new_namespaces = {c.name for c in plan.changes if c.action == CREATE and c.kind == "Namespace"}
    for change in plan.changes:
        if change.action not in (CREATE, UPDATE, DRAIN):
            continue
        if change.namespace in new_namespaces:
            # The server would answer 404: the namespace only exists once applied.
            change.note = change.note or "not dry-run: its namespace is created by this plan"
            continue
        if change.recreate:
            continue  # an update the server refuses by design; apply replaces it
        body = _drain_body(change) if change.action == DRAIN else change.desired
        assert body is not None
        try:
            backend.apply(body, force=change.force, dry_run=True)
        except BackendError as exc:
            run.errors.append(
                _error(change, f"server dry run refused it: {exc}", transient=exc.transient)
            )


def _error(change: Change, message: str, *, transient: bool) -> dict[str, Any]:
    """One entry of a run's ``errors``: the object, what was tried and why it failed."""
    return {
        "kind": change.kind,
        "namespace": change.namespace or None,
        "name": change.name,
        "action": change.action,
        "message": message,
        "transient": transient,
    }


def _apply_plan(backend: ClusterBackend, plan: Plan, run: ReconcileRun, calls: _Calls) -> None:
    # Creates and updates in dependency order; deletions in reverse (LocalQueues
    # before their ClusterQueues, queues before the cohorts and flavors they
    # name, flavors before their Topology). An object replaced for an immutable
    # field goes in the deletions' order, once what names it is gone.
    upserts = [c for c in plan.changes if c.action in (CREATE, UPDATE, DRAIN) and not c.recreate]
    deletes = [c for c in plan.changes if c.action == DELETE or c.recreate]
    order = {kind: i for i, kind in enumerate(POLICY_KINDS)}
    deletes.sort(key=lambda c: -order[c.kind])
    for change in [*upserts, *deletes]:
        try:
            _execute(backend, change, calls)
        except BackendError as exc:
            run.errors.append(_error(change, str(exc), transient=exc.transient))
            continue
        if change.action == CREATE:
            run.created += 1
        elif change.action == UPDATE:
            run.updated += 1
            if change.drift:
                run.drifted += 1
                DriftRecord.objects.create(
                    run=run,
                    kind=change.kind,
                    namespace=change.namespace,
                    name=change.name,
                    fields=change.fields,
                    cluster_value={"spec": (change.actual or {}).get("spec")},
                )
        elif change.action == DRAIN:
            run.drained += 1
        elif change.action == DELETE:
            run.deleted += 1
    for change in plan.changes:
        if change.action == CONFLICT:
            run.errors.append(_error(change, change.note, transient=False))


def reconcile(
    backend: ClusterBackend, *, trigger: str = ReconcileRun.Trigger.MANUAL, dry_run: bool = False
) -> ReconcileRun:
    """One reconcile run (or a recorded skip when another one holds the lock)."""
    with try_lock(LOCK) as taken:
        if not taken:
            return ReconcileRun.objects.create(
                trigger=trigger,
                backend=backend.name,
                dry_run=dry_run,
                status=ReconcileRun.Status.SKIPPED,
                finished_at=timezone.now(),
                message="another reconcile is running; it will pick up this change",
            )
        run = ReconcileRun.objects.create(trigger=trigger, backend=backend.name, dry_run=dry_run)
        try:
            _run(backend, run, dry_run)
        except KueueNotInstalled as exc:
            run.status = ReconcileRun.Status.FAILED
            run.message = str(exc)
        except BackendError as exc:
            run.status = ReconcileRun.Status.FAILED
            run.message = f"the cluster could not be read: {exc}"
        except Exception as exc:
            run.status = ReconcileRun.Status.FAILED
            run.message = f"internal error: {exc!r}; see the worker's log"
            run.finished_at = timezone.now()
            run.save()
            raise
        run.finished_at = timezone.now()
        run.save()
        log.info("%s: %s", run, run.message)
        return run


def reconcile_configured_cluster(*, trigger: str, dry_run: bool = False) -> ReconcileRun:
    """Reconcile the cluster the settings name. One Berth cannot even connect to
    (no kubeconfig, unknown context) is recorded as a failed run that says why,
    like any other failure, rather than an error nobody sees."""
    try:
        backend = get_backend()
    except BackendError as exc:
        run = ReconcileRun.objects.create(
            trigger=trigger,
            backend=str(settings.BERTH_CLUSTER),
            dry_run=dry_run,
            status=ReconcileRun.Status.FAILED,
            finished_at=timezone.now(),
            message=str(exc),
        )
        log.error("%s: %s", run, run.message)
        return run
    return reconcile(backend, trigger=trigger, dry_run=dry_run)


def _run(backend: ClusterBackend, run: ReconcileRun, dry_run: bool) -> None:
    calls = _Calls()
    versions = calls.read(backend.kueue_versions)
    if KUEUE_VERSION not in versions:
        raise KueueNotInstalled(
            f"the cluster serves Kueue {', '.join(versions)} but Berth needs {KUEUE_VERSION} "
            "(Kueue 0.16 or newer)"
        )
    for _ in range(MAX_PASSES):
        version = policy_version()
        run.errors = []  # a later pass retries what failed; only its errors stand
        plan = compute_plan(backend, calls)
        run.policy_version = version
        run.changes = [c.as_dict() for c in plan.changes if c.action != "unchanged"]
        run.unchanged = len(plan.by_action("unchanged"))
        if plan.prune_refused:
            run.message = (
                "nothing was pruned: the policy is empty, which looks like a wiped "
                "or misconfigured database; Berth's objects stay on the cluster"
            )
        if dry_run:
            _dry_run_plan(backend, plan, run)
            run.changes = [c.as_dict() for c in plan.changes if c.action != "unchanged"]
            break
        _apply_plan(backend, plan, run, calls)
        if policy_version() == version:
            break
    run.write_calls = calls.writes
    run.retries = calls.retries
    if run.errors:
        run.status = ReconcileRun.Status.PARTIAL
        run.message = run.message or f"{len(run.errors)} object(s) failed; see errors"
    else:
        run.status = ReconcileRun.Status.SUCCEEDED
        if not run.message:
            writes = run.created + run.updated + run.deleted + run.drained
            run.message = (
                "in sync: nothing to change"
                if not writes and not dry_run
                else f"{writes} change(s) applied"
                if not dry_run
                else f"{len(run.changes)} change(s) planned"
            )
    manual = sum(1 for change in run.changes if change["action"] == MANUAL)
    if manual:
        run.message += f"; {manual} manual step(s) for an admin of the cluster (see changes)"
