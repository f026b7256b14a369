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

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from queues.backends.base import TYPES, BackendError
from queues.engine.model import Policy, Workload
from queues.engine.outcomes import CycleResult
from queues.engine.runner import run_cycles
from queues.engine.scheduler import Scheduler
from queues.simulation.annotations import DONE
from queues.simulation.fair_usage import load_usage, sample_usage
from queues.simulation.job_kinds import KINDS, condition, kind_of, set_condition
from queues.simulation.policy import read_policy
from queues.simulation.queue_status import cluster_queue_status, finished, local_queue_status
from queues.simulation.selectors import selects
from queues.simulation.workload_reading import engine_workload
from queues.simulation.workload_status import PAST_EXECUTION, WorkloadStatusWriter

log = logging.getLogger(__name__)

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"


@dataclass
class TickResult:
    workloads_created: int = 0
    admitted: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    # Deactivated for running past spec.maximumExecutionTimeSeconds.
    timed_out: list[str] = field(default_factory=list)


@dataclass
class _Queues:
    """What a tick reads of the queues: each LocalQueue's ClusterQueue, the
    stopped LocalQueues' stop policies, ClusterQueues' namespace selectors and
    the namespaces' labels they select on."""

    local_queues: dict[tuple[str, str], str]
    stopped: dict[tuple[str, str], str]
    selectors: dict[str, Any]
    namespace_labels: dict[str, dict[str, str]]


@dataclass
class _Triage:
    """What a tick sets aside before the cycles: workloads whose job has done
    its work, those past their maximum execution time, and those holding quota
    whose admission checks may have answered."""

    finished: list[dict[str, Any]] = field(default_factory=list)
    timed_out: list[dict[str, Any]] = field(default_factory=list)
    answered: list[tuple[dict[str, Any], Workload]] = field(default_factory=list)


class SimulatedKueue(WorkloadStatusWriter):
    """Kueue, the Job controller and the kubelet, for the simulated cluster.
    ``speedup`` compresses work, not time: timestamps stay real, and an
    admitted job does ``speedup`` seconds of its declared runtime per second.
    A maximum execution time is work too: a workload admitted longer than
    that in all (its past admissions counted, as Kueue does) is deactivated
    with Kueue's reason, its quota freed and its job stopped."""

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

    def tick(self, now: float) -> TickResult:
        result = TickResult(workloads_created=self._create_workloads(now))
        policy = read_policy(self.backend)
        if policy is None:
            return result
        queues = self._read_queues()
        stored = {
            (w["metadata"]["namespace"], w["metadata"]["name"]): w
            for w in self.backend.list(TYPES["Workload"])[0]
        }
        scheduler = Scheduler(policy, now=now)
        triage = self._triage(scheduler, policy, queues, stored, now)
        for obj, workload in triage.answered:
            self._answer_checks(scheduler, obj, workload, now)
        for obj in triage.finished:
            self._finish(obj, now)
            result.finished.append(_key(obj))
        for obj in triage.timed_out:
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
        self._write_cycles(scheduler, cycles, stored, result, now)
        cluster_queue_status(self.backend, self._write, scheduler, now)
        local_queue_status(self.backend, self._write, stored, now)
        return result

    def _read_queues(self) -> _Queues:
        local_queue_objects = self.backend.list(TYPES["LocalQueue"])[0]
        return _Queues(
            local_queues={
                (q["metadata"]["namespace"], q["metadata"]["name"]): q["spec"]["clusterQueue"]
                for q in local_queue_objects
            },
            namespace_labels={
                n["metadata"]["name"]: n["metadata"].get("labels") or {}
                for n in self.backend.list(TYPES["Namespace"])[0]
            },
            selectors={
                q["metadata"]["name"]: q["spec"].get("namespaceSelector")
                for q in self.backend.list(TYPES["ClusterQueue"])[0]
            },
            stopped={
                (q["metadata"]["namespace"], q["metadata"]["name"]): q["spec"]["stopPolicy"]
                for q in local_queue_objects
                if q["spec"].get("stopPolicy", "None") != "None"
            },
        )

    def _triage(
        self,
        scheduler: Scheduler,
        policy: Policy,
        queues: _Queues,
        stored: Mapping[tuple[str, str], dict[str, Any]],
        now: float,
    ) -> _Triage:
        """Hand the scheduler every workload it may consider. Those that ran out
        are set aside for the caller; those it may not consider (no LocalQueue,
        a stopped one, a namespace their ClusterQueue does not select) are
        marked pending here."""
        triage = _Triage()
        for (namespace, _name), obj in sorted(stored.items()):
            if finished(obj):
                continue
            queue = queues.local_queues.get((namespace, obj["spec"].get("queueName", "")))
            if queue is None or queue not in policy.cluster_queues:
                self._pending(
                    obj,
                    "Inadmissible",
                    f"LocalQueue {obj['spec'].get('queueName')} doesn't exist",
                    now,
                )
                continue
            workload = engine_workload(obj, queue, now)
            stop = queues.stopped.get((namespace, obj["spec"].get("queueName", "")))
            if stop is not None and self._held(obj, workload, stop, now):
                continue
            if workload.admission is None and not selects(
                queues.selectors.get(queue), queues.namespace_labels.get(namespace, {})
            ):
                # Kueue's workload controller: inadmissible until the labels match.
                self._pending(
                    obj,
                    "Inadmissible",
                    "Workload namespace doesn't match ClusterQueue selector",
                    now,
                )
                continue
            ran_out = self._ran_out(obj, workload, now)
            if ran_out == "finished":
                triage.finished.append(obj)
                continue
            if ran_out == "timed-out":
                triage.timed_out.append(obj)
                continue
            if workload.active:
                scheduler.add(workload)
                if workload.admission is not None and workload.check_states:
                    triage.answered.append((obj, workload))
        return triage

    def _ran_out(
        self, obj: Mapping[str, Any], workload: Workload, now: float
    ) -> Literal["finished", "timed-out"] | None:
        """For a running workload: finished once its job has done its declared
        runtime's work; timed out once it ran past its maximum execution time."""
        if (
            workload.admission is not None
            and workload.admitted_at is not None
            and (workload.is_admitted or not workload.check_states)
        ):
            done = float(obj["metadata"].get("annotations", {}).get(DONE, 0))
            worked = (now - workload.admitted_at) * self.speedup
            if done + worked >= (workload.runtime or 0):
                return "finished"
            limit = obj["spec"].get("maximumExecutionTimeSeconds")
            past = float((obj.get("status") or {}).get(PAST_EXECUTION, 0))
            if limit is not None and past + worked >= float(limit):
                return "timed-out"
        return None

    def _write_cycles(
        self,
        scheduler: Scheduler,
        cycles: CycleResult,
        stored: Mapping[tuple[str, str], dict[str, Any]],
        result: TickResult,
        now: float,
    ) -> None:
        """Write what the cycles decided: admissions (or reservations), evictions
        of the preempted, and why each workload they evaluated is still pending."""
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
