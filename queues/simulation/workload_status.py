"""How the simulated Kueue writes down what it decided: a Workload's admission,
conditions and admission checks as it is admitted, left pending, held by a
stopped LocalQueue, evicted, deactivated or finished (Kueue's workload
controller), and its jobs suspended, resumed or finished to match (the job
controllers). ``SimulatedKueue`` (``queues.simulation.kueue``) decides; this is
the part that talks to the backend, kept apart so the deciding reads on its own.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any

from queues.backends.base import TYPES, BackendError
from queues.backends.simulated import SimulatedBackend
from queues.engine.model import CheckState, Workload
from queues.engine.scheduler import Scheduler
from queues.kueue import topology_assignment
from queues.quantity import format_canonical
from queues.simulation.annotations import CHECKPOINT, DONE, STARTED, epoch
from queues.simulation.job_kinds import JobKind, condition, iso, kind_of, set_condition

log = logging.getLogger(__name__)

# Kueue's status field, spelled as its v1beta1 API spells it.
PAST_EXECUTION = "accumulatedPastExexcutionTimeSeconds"


class WorkloadStatusWriter:
    """The writes, to ``backend``; ``speedup`` is how many seconds of its
    declared runtime an admitted job works per second (see ``SimulatedKueue``)."""

    def __init__(self, backend: SimulatedBackend, speedup: float = 1.0) -> None:
        self.backend = backend
        self.speedup = speedup

    def _write(self, body: dict[str, Any]) -> None:
        """Write back what Kueue or a job controller changed. An object deleted
        since this step read it (a job cancelled meanwhile, its Workload gone
        with it) stays gone: like a controller's update that gets NotFound."""
        try:
            self.backend.replace(body)
        except BackendError as exc:
            if exc.status != 404:
                raise
            metadata = body["metadata"]
            log.info(
                "%s %s/%s was deleted during the step",
                body["kind"],
                metadata.get("namespace", ""),
                metadata["name"],
            )

    def _refresh(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        metadata = obj["metadata"]
        current = self.backend.get(TYPES[obj["kind"]], metadata["name"], metadata.get("namespace"))
        return copy.deepcopy(current if current is not None else dict(obj))

    def _held(self, obj: Mapping[str, Any], workload: Workload, stop: str, now: float) -> bool:
        """A workload of a stopped LocalQueue, as Kueue's workload controller
        treats it: admitted, it runs on under Hold and is evicted under
        HoldAndDrain; otherwise it is inadmissible (any reservation dropped).
        True when the scheduler must not see it."""
        queue = obj["spec"].get("queueName", "")
        if workload.is_admitted and workload.admitted_at is not None:
            if stop != "HoldAndDrain":
                return False
            self._evict(obj, "LocalQueueStopped", "The LocalQueue is stopped", now, preempted=False)
            return True
        if (obj.get("status") or {}).get("admission"):
            body = self._refresh(obj)
            body["status"].pop("admission", None)
            self._write(body)
            obj = body
        self._pending(obj, "Inadmissible", f"LocalQueue {queue} is stopped", now)
        return True

    def _pending(self, obj: Mapping[str, Any], reason: str, message: str, now: float) -> None:
        body = self._refresh(obj)
        before = copy.deepcopy(body.get("status"))
        set_condition(body, condition("QuotaReserved", False, reason, message, now))
        if body.get("status") != before:
            self._write(body)

    def _admit(
        self,
        obj: Mapping[str, Any],
        workload: Workload,
        flavors: Mapping[str, Mapping[str, str]],
        now: float,
        placement: Mapping[str, Mapping[str, int]] | None = None,
    ) -> None:
        body = self._refresh(obj)
        assignments = []
        counts = workload.admitted_counts or {}
        for pod_set in workload.pod_sets:
            count = counts.get(pod_set.name, pod_set.count)
            usage = {
                r: format_canonical(r, a * count)
                for r, a in pod_set.requests.items()
                if r in flavors.get(pod_set.name, {})
            }
            assignment: dict[str, Any] = {
                "name": pod_set.name,
                "flavors": dict(flavors[pod_set.name]),
                "resourceUsage": usage,
                "count": count,
            }
            nodes = (placement or {}).get(pod_set.name)
            if nodes:  # where the pods go on a topology-aware flavor, as Kueue says it
                assignment["topologyAssignment"] = topology_assignment.encode(
                    [topology_assignment.HOSTNAME],
                    [((node,), pods) for node, pods in nodes.items()],
                )
            assignments.append(assignment)
        status = body.setdefault("status", {})
        status["admission"] = {
            "clusterQueue": workload.cluster_queue,
            "podSetAssignments": assignments,
        }
        set_condition(
            body,
            condition(
                "QuotaReserved",
                True,
                "QuotaReserved",
                f"Quota reserved in ClusterQueue {workload.cluster_queue}",
                now,
            ),
        )
        if any(c["type"] == "Evicted" for c in status.get("conditions", [])):
            set_condition(
                body, condition("Evicted", False, "QuotaReserved", "Previously: evicted", now)
            )
        if workload.check_states:
            status["admissionChecks"] = _reset_checks(status, workload.check_states, now)
        if workload.is_admitted:
            set_condition(
                body, condition("Admitted", True, "Admitted", "The workload is admitted", now)
            )
            body["metadata"].setdefault("annotations", {})[STARTED] = iso(now)
            self._set_job_suspended(body, False, now)
        self._write(body)

    def _answer_checks(
        self, scheduler: Scheduler, obj: Mapping[str, Any], workload: Workload, now: float
    ) -> None:
        """What Kueue's workload controller does once check controllers answered:
        every check Ready admits (and unsuspends the job); a Rejected check
        deactivates the workload and releases its quota; Retry evicts and
        requeues it."""
        states = set(workload.check_states.values())
        admitted = _true(obj, "Admitted")
        if workload.is_admitted and not admitted:
            body = self._refresh(obj)
            set_condition(
                body, condition("Admitted", True, "Admitted", "The workload is admitted", now)
            )
            body["metadata"].setdefault("annotations", {})[STARTED] = iso(now)
            self._write(body)
            self._set_job_suspended(body, False, now)
        elif CheckState.REJECTED in states or CheckState.RETRY in states:
            retry_at = _retry_time(obj, now)
            workload.requeue_at = retry_at  # out of its queue until then, this step too
            scheduler.reconcile_checks(workload.key)
            pending = scheduler.status.get(workload.key)
            message = pending.message if pending else "AdmissionCheck answered"
            if CheckState.REJECTED in states:
                self._deactivate(obj, message, now)
            else:
                self._evict(
                    obj, "AdmissionCheck", message, now, preempted=False, requeue_at=retry_at
                )

    def _deactivate(
        self,
        obj: Mapping[str, Any],
        message: str,
        now: float,
        reason: str = "DeactivatedDueToAdmissionCheck",
    ) -> None:
        body = self._refresh(obj)
        body["spec"]["active"] = False
        status = body.setdefault("status", {})
        status.pop("admission", None)
        status.pop(PAST_EXECUTION, None)  # Kueue clears it as it deactivates
        body["metadata"].setdefault("annotations", {}).pop(STARTED, None)
        set_condition(body, condition("Evicted", True, reason, message, now))
        set_condition(body, condition("QuotaReserved", False, "Inactive", message, now))
        set_condition(
            body,
            condition("Admitted", False, "NoReservation", "The workload has no reservation", now),
        )
        self._write(body)
        self._set_job_suspended(body, True, now)

    def _evict(
        self,
        obj: Mapping[str, Any],
        reason: str,
        message: str,
        now: float,
        *,
        preempted: bool = True,
        requeue_at: float | None = None,
    ) -> None:
        """Evict a workload: by preemption (``reason`` is the preemption's), or,
        with ``preempted`` False, for ``reason`` itself (a stopped queue)."""
        body = self._refresh(obj)
        annotations = body["metadata"].setdefault("annotations", {})
        started = epoch(annotations.pop(STARTED, None), now)
        progress = float(annotations.get(DONE, 0)) + max(0.0, now - started) * self.speedup
        interval = float(annotations.get(CHECKPOINT, 0) or 0)
        annotations[DONE] = str(int(progress // interval * interval) if interval else 0)
        status = body.setdefault("status", {})
        if status.get("admission"):  # the time it ran counts towards its maximum
            ran = max(0.0, now - started) * self.speedup
            status[PAST_EXECUTION] = int(float(status.get(PAST_EXECUTION, 0)) + ran)
        status.pop("admission", None)
        if requeue_at is not None:  # Kueue's requeueState: not queued before then
            status.setdefault("requeueState", {})["requeueAt"] = iso(requeue_at)
        # Kueue keeps the checks and resets them to Pending: asked again next time.
        if status.get("admissionChecks"):
            status["admissionChecks"] = _reset_checks(
                status, {c["name"]: CheckState.PENDING for c in status["admissionChecks"]}, now
            )
        set_condition(
            body, condition("Evicted", True, "Preempted" if preempted else reason, message, now)
        )
        if preempted:
            set_condition(body, condition("Preempted", True, reason, message, now))
        set_condition(body, condition("QuotaReserved", False, "Pending", message, now))
        set_condition(
            body,
            condition("Admitted", False, "NoReservation", "The workload has no reservation", now),
        )
        set_condition(
            body, condition("Requeued", True, "Preempted" if preempted else reason, message, now)
        )
        self._set_job_suspended(body, True, now)
        self._write(body)

    def _finish(self, obj: Mapping[str, Any], now: float) -> None:
        body = self._refresh(obj)
        set_condition(
            body, condition("Finished", True, "Succeeded", "Job finished successfully", now)
        )
        self._write(body)
        for kind, job in self._jobs(body):
            if not kind.finished(job):
                kind.finish(job, now)
                self._write(job)

    def _jobs(self, workload: Mapping[str, Any]) -> list[tuple[JobKind, dict[str, Any]]]:
        """The jobs owning a workload (copies, to change and write back)."""
        found = []
        for ref in workload["metadata"].get("ownerReferences", []):
            kind = kind_of(ref)
            if kind is None:
                continue
            job = self.backend.get(TYPES[kind.kind], ref["name"], workload["metadata"]["namespace"])
            if job is not None and job["metadata"].get("uid") == ref.get("uid"):
                found.append((kind, copy.deepcopy(job)))
        return found

    def _set_job_suspended(self, workload: Mapping[str, Any], suspended: bool, now: float) -> None:
        for kind, job in self._jobs(workload):
            if kind.suspended(job) != suspended:
                kind.set_suspended(job, suspended, now)
                self._write(job)


def _retry_time(obj: Mapping[str, Any], now: float) -> float | None:
    """The latest time a Retry check asked to wait until (its lastTransitionTime
    plus requeueAfterSeconds), if still ahead: Kueue's requeueAt."""
    latest = None
    for check in (obj.get("status") or {}).get("admissionChecks", []):
        after = check.get("requeueAfterSeconds")
        if check.get("state") != CheckState.RETRY.value or not isinstance(after, int):
            continue
        at = epoch(check.get("lastTransitionTime"), now) + after
        latest = at if latest is None else max(latest, at)
    return latest if latest is not None and latest > now else None


def _true(obj: Mapping[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions", [])
    )


def _reset_checks(
    status: Mapping[str, Any], states: Mapping[str, CheckState], now: float
) -> list[dict[str, Any]]:
    """The check list with ``states``; an entry whose state is unchanged keeps
    its time and message (what its controller wrote), as in Kueue."""
    current = {c["name"]: c for c in status.get("admissionChecks") or []}
    checks = []
    for name, state in sorted(states.items()):
        entry = current.get(name)
        if entry is not None and entry.get("state") == state.value:
            checks.append(dict(entry))
        else:
            checks.append(
                {"name": name, "state": state.value, "lastTransitionTime": iso(now), "message": ""}
            )
    return checks
