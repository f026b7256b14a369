"""Kueue and the job controller, emulated over the simulated backend with
Berth's own admission engine.

Each ``tick``: jobs of every kind in ``job_kinds`` (batch Job, JobSet,
PyTorchJob, TrainJob) that name a LocalQueue get a Workload (Kueue's job
integrations); workloads whose job has run its time finish, and so does the
job, the way its kind reports it; the engine runs scheduling cycles until
nothing changes; admitted workloads get their admission and conditions and
their job is unsuspended; preempted ones are evicted and their job suspended
again; pending ones get Kueue's message; and
ClusterQueues and LocalQueues get Kueue-like status. Timestamps are real;
the speed-up makes admitted jobs work faster, not the clock run faster, so
what sync stores and the dashboard shows stays in real time.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from queues.backends.base import TYPES, BackendError
from queues.backends.simulated import SimulatedBackend
from queues.engine.model import CheckState, Workload
from queues.engine.runner import run_cycles
from queues.engine.scheduler import Scheduler
from queues.kueue import topology_assignment
from queues.quantity import format_canonical
from queues.simulation.annotations import (
    CHECKPOINT,
    DONE,
    STARTED,
    epoch,
)
from queues.simulation.fair_usage import load_usage, sample_usage
from queues.simulation.job_kinds import (
    KINDS,
    JobKind,
    condition,
    iso,
    kind_of,
    set_condition,
)
from queues.simulation.policy import read_policy
from queues.simulation.queue_status import cluster_queue_status, finished, local_queue_status
from queues.simulation.selectors import selects
from queues.simulation.workload_reading import engine_workload

log = logging.getLogger(__name__)

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"


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


@dataclass
class TickResult:
    workloads_created: int = 0
    admitted: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    # Deactivated for running past spec.maximumExecutionTimeSeconds.
    timed_out: list[str] = field(default_factory=list)


# Kueue's status field, spelled as its v1beta1 API spells it.
PAST_EXECUTION = "accumulatedPastExexcutionTimeSeconds"


class SimulatedKueue:
    """Kueue, the Job controller and the kubelet, for the simulated cluster.
    ``speedup`` compresses work, not time: timestamps stay real, and an
    admitted job does ``speedup`` seconds of its declared runtime per second.
    A maximum execution time is work too: a workload admitted longer than
    that in all (its past admissions counted, as Kueue does) is deactivated
    with Kueue's reason, its quota freed and its job stopped."""

    def __init__(self, backend: SimulatedBackend, speedup: float = 1.0) -> None:
        self.backend = backend
        self.speedup = speedup

    # --------------------------------------------------------- job controller

    def _create_workloads(self, now: float) -> int:
        workloads, _ = self.backend.list(TYPES["Workload"])
        # Kueue finds a job's Workload by the owner's UID: a job submitted again
        # under an old job's name is a new job.
        owned = {
            ref.get("uid") for w in workloads for ref in w["metadata"].get("ownerReferences", [])
        }
        priorities = {
            p["metadata"]["name"]: p.get("value", 0)
            for p in self.backend.list(TYPES["WorkloadPriorityClass"])[0]
        }
        created = 0
        for kind in KINDS.values():
            for job in self.backend.list(TYPES[kind.kind])[0]:
                metadata = job["metadata"]
                queue = metadata.get("labels", {}).get(QUEUE_LABEL)
                if not queue or metadata.get("uid") in owned:
                    continue
                if kind_of(job) is not kind or kind.finished(job):
                    continue
                try:
                    self._create_workload(job, queue, priorities, now)
                except BackendError as exc:
                    if exc.status != 409:
                        raise
                    # A Workload of an older job of that name, not yet collected
                    # (Kueue's names carry a hash of the job's UID; these do not):
                    # this job gets its own once the garbage collector took it.
                    log.warning(
                        "job %s/%s waits for its Workload: %s",
                        metadata["namespace"],
                        metadata["name"],
                        exc,
                    )
                    continue
                created += 1
        return created

    def _create_workload(
        self, job: Mapping[str, Any], queue: str, priorities: Mapping[str, Any], now: float
    ) -> None:
        kind = KINDS[job["kind"]]
        metadata = job["metadata"]
        labels = metadata.get("labels", {})
        priority_class = labels.get(PRIORITY_LABEL, "")
        workload: dict[str, Any] = {
            "apiVersion": TYPES["Workload"].api_version,
            "kind": "Workload",
            "metadata": {
                "name": kind.workload_name(job),
                "namespace": metadata["namespace"],
                "labels": {"kueue.x-k8s.io/job-uid": metadata.get("uid", "")},
                "annotations": {
                    k: v
                    for k, v in metadata.get("annotations", {}).items()
                    if k.startswith("berth.dev/")
                },
                "ownerReferences": [kind.owner_reference(job)],
            },
            "spec": {
                "queueName": queue,
                "priority": int(priorities.get(priority_class, 0)),
                "podSets": [pod_set.as_dict() for pod_set in kind.pod_sets(job)],
                "active": True,
            },
        }
        if priority_class:
            workload["spec"]["priorityClassRef"] = {
                "group": "kueue.x-k8s.io",
                "kind": "WorkloadPriorityClass",
                "name": priority_class,
            }
        if str(labels.get(MAX_EXEC_TIME_LABEL, "")).isdigit():
            workload["spec"]["maximumExecutionTimeSeconds"] = int(labels[MAX_EXEC_TIME_LABEL])
        body = self.backend.create(workload)
        set_condition(
            body,
            condition("QuotaReserved", False, "Pending", "waiting for a scheduling cycle", now),
        )
        self.backend.replace(body)

    # ------------------------------------------------------------ the engine

    # ------------------------------------------------------------------- tick

    def tick(self, now: float) -> TickResult:
        result = TickResult(workloads_created=self._create_workloads(now))
        policy = read_policy(self.backend)
        if policy is None:
            return result
        local_queue_objects = self.backend.list(TYPES["LocalQueue"])[0]
        local_queues = {
            (q["metadata"]["namespace"], q["metadata"]["name"]): q["spec"]["clusterQueue"]
            for q in local_queue_objects
        }
        namespace_labels = {
            n["metadata"]["name"]: n["metadata"].get("labels") or {}
            for n in self.backend.list(TYPES["Namespace"])[0]
        }
        selectors = {
            q["metadata"]["name"]: q["spec"].get("namespaceSelector")
            for q in self.backend.list(TYPES["ClusterQueue"])[0]
        }
        stopped = {
            (q["metadata"]["namespace"], q["metadata"]["name"]): q["spec"]["stopPolicy"]
            for q in local_queue_objects
            if q["spec"].get("stopPolicy", "None") != "None"
        }
        stored = {
            (w["metadata"]["namespace"], w["metadata"]["name"]): w
            for w in self.backend.list(TYPES["Workload"])[0]
        }
        scheduler = Scheduler(policy, now=now)
        finished_now: list[dict[str, Any]] = []
        timed_out: list[dict[str, Any]] = []
        answered: list[tuple[dict[str, Any], Workload]] = []
        for (namespace, _name), obj in sorted(stored.items()):
            if finished(obj):
                continue
            queue = local_queues.get((namespace, obj["spec"].get("queueName", "")))
            if queue is None or queue not in policy.cluster_queues:
                self._pending(
                    obj,
                    "Inadmissible",
                    f"LocalQueue {obj['spec'].get('queueName')} doesn't exist",
                    now,
                )
                continue
            workload = engine_workload(obj, queue, now)
            stop = stopped.get((namespace, obj["spec"].get("queueName", "")))
            if stop is not None and self._held(obj, workload, stop, now):
                continue
            if workload.admission is None and not selects(
                selectors.get(queue), namespace_labels.get(namespace, {})
            ):
                # Kueue's workload controller: inadmissible until the labels match.
                self._pending(
                    obj,
                    "Inadmissible",
                    "Workload namespace doesn't match ClusterQueue selector",
                    now,
                )
                continue
            if (
                workload.admission is not None
                and workload.admitted_at is not None
                and (workload.is_admitted or not workload.check_states)
            ):
                done = float(obj["metadata"].get("annotations", {}).get(DONE, 0))
                worked = (now - workload.admitted_at) * self.speedup
                if done + worked >= (workload.runtime or 0):
                    finished_now.append(obj)
                    continue
                limit = obj["spec"].get("maximumExecutionTimeSeconds")
                past = float((obj.get("status") or {}).get(PAST_EXECUTION, 0))
                if limit is not None and past + worked >= float(limit):
                    timed_out.append(obj)
                    continue
            if workload.active:
                scheduler.add(workload)
                if workload.admission is not None and workload.check_states:
                    answered.append((obj, workload))
        for obj, workload in answered:
            self._answer_checks(scheduler, obj, workload, now)
        for obj in finished_now:
            self._finish(obj, now)
            result.finished.append(_key(obj))
        for obj in timed_out:
            self._deactivate(
                obj,
                f"The maximum execution time ({obj['spec']['maximumExecutionTimeSeconds']}s) "
                "exceeded",
                now,
                reason="DeactivatedDueToMaximumExecutionTimeExceeded",
            )
            result.timed_out.append(_key(obj))
        load_usage(self.backend, scheduler, now)
        sample_usage(self.backend, self._write, scheduler, now)
        cycles = run_cycles(scheduler, until_stable=True)
        for key, flavors in {**cycles.admitted, **cycles.reserved}.items():
            placed = scheduler.placer.pods_on.get(key) if scheduler.placer else None
            self._admit(stored[_split(key)], scheduler.workloads[key], flavors, now, placed)
            result.admitted.append(key)
        for preemption in cycles.preempted:
            victim = stored.get(_split(preemption.victim))
            if victim is not None:
                message = _kueue_preemption_message(
                    preemption.message,
                    preemption.preemptor,
                    stored.get(_split(preemption.preemptor)),
                )
                self._evict(victim, preemption.reason.value, message, now)
                result.preempted.append(preemption.victim)
        for key, pending in scheduler.status.items():
            if key in cycles.evaluated and key not in cycles.admitted:
                waiting = stored.get(_split(key))
                if waiting is not None and not (waiting.get("status") or {}).get("admission"):
                    self._pending(waiting, "Pending", pending.message, now)
        cluster_queue_status(self.backend, self._write, scheduler, now)
        local_queue_status(self.backend, self._write, stored, now)
        return result

    # --------------------------------------------------------------- writes

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


def _key(obj: Mapping[str, Any]) -> str:
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


def _split(key: str) -> tuple[str, str]:
    namespace, _, name = key.partition("/")
    return namespace, name


def _kueue_preemption_message(
    message: str, preemptor_key: str, preemptor: Mapping[str, Any] | None
) -> str:
    """Kueue names the preemptor by UID and its job's UID; the engine, which has
    no UIDs, by namespace/name."""
    if preemptor is None:
        return message
    metadata = preemptor["metadata"]
    job_uid = metadata.get("labels", {}).get("kueue.x-k8s.io/job-uid", "")
    return message.replace(
        f"({preemptor_key})", f"(UID: {metadata.get('uid', '')}, JobUID: {job_uid})", 1
    )
