"""Capacity plans: read and check what is asked (targets, flavors, seeds,
growth, the window or scenario), store the plan with today's policy, and run
it once in the worker: the search of ``queues.engine.capacity_search`` on the
window's recorded workloads (``whatif.stream``), with progress.

A target names a queue class (every ClusterQueue of that class, as the policy
labels them ``berth.dev/queue-class``) or one ClusterQueue; the curve shows
every queue class the replay has workloads of."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import yaml
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from cluster.state import observed_nodes
from queues.deferred import after_commit
from queues.engine.capacity import GPU, Perturbation, capacity_flavors
from queues.engine.capacity_search import Load, Request, Search, Target
from queues.engine.model import Policy
from queues.engine.reading import Reader, read_seconds
from queues.engine.scenario import ScenarioError, parse
from queues.errors import FieldError, PolicyInvalid
from queues.reconcile import desired_objects, policy_version
from whatif.figures import _clean
from whatif.models import CapacityPlan, WhatIfSource, WhatIfState
from whatif.plan_scaleout import PlanEnded, ReplayFailed, search_apart
from whatif.proposal import (
    MAX_PLAN_WORKLOADS,
    MAX_SCENARIO_BYTES,
    PROGRESS_EVERY_SECONDS,
)
from whatif.proposal import policy_document as to_document
from whatif.runs import ProgressWriter, read_window, window_stream
from whatif.scaleout import replay_workers
from whatif.stream import Stream, scenario_size, scenario_stream, window_records

log = logging.getLogger(__name__)

RUN_CAPACITY_PLAN = "whatif.tasks.run_capacity_plan"
QUEUE_CLASS_LABEL = "berth.dev/queue-class"
DEFAULT_WINDOW = timedelta(days=30)
DEFAULT_PERCENTILE = 90.0
DEFAULT_SEEDS = 3
MAX_SEEDS = 10
MAX_TARGETS = 10
MAX_GROWTH = 5.0
REQUEST_KEYS = (
    "source",
    "window_start",
    "window_end",
    "scenario",
    "targets",
    "flavors",
    "growth",
    "seeds",
)
TARGET_KEYS = ("queue", "percentile", "max_wait")


# ------------------------------------------------------------------- groups


def queue_classes(objects: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Queue class -> its ClusterQueues, from the ``berth.dev/queue-class``
    label of rendered (or pasted) ClusterQueue objects."""
    classes: dict[str, list[str]] = {}
    for obj in objects:
        if not isinstance(obj, Mapping) or obj.get("kind") != "ClusterQueue":
            continue
        metadata = obj.get("metadata")
        if not isinstance(metadata, Mapping):
            continue
        labels = metadata.get("labels")
        label = labels.get(QUEUE_CLASS_LABEL) if isinstance(labels, Mapping) else None
        name = metadata.get("name")
        if isinstance(label, str) and label and isinstance(name, str):
            classes.setdefault(label, []).append(name)
    return {name: sorted(queues) for name, queues in sorted(classes.items())}


def _groups(
    policy: Policy, classes: Mapping[str, list[str]], targets: list[dict[str, Any]]
) -> dict[str, list[str]]:
    """What the curve shows: every queue class with a ClusterQueue in the
    policy, each ClusterQueue in none, and the ClusterQueues targets name."""
    groups = {
        name: [q for q in queues if q in policy.cluster_queues] for name, queues in classes.items()
    }
    groups = {name: queues for name, queues in groups.items() if queues}
    classed = {q for queues in groups.values() for q in queues}
    for queue in sorted(policy.cluster_queues):
        if queue not in classed and queue not in groups:
            groups[queue] = [queue]
    for target in targets:
        if target["queue"] not in groups:
            groups[target["queue"]] = [target["queue"]]
    return groups


# ------------------------------------------------------------------ reading


def _number(
    path: str, value: Any, default: float, low: float, high: float, errors: list[FieldError]
) -> float:
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        errors.append(FieldError(path, "type", "must be a number"))
        return default
    try:
        number = float(value)
    except (TypeError, ValueError):
        errors.append(FieldError(path, "type", f"{value!r} is not a number"))
        return default
    if not math.isfinite(number) or not low <= number <= high:
        errors.append(FieldError(path, "range", f"must be between {low:g} and {high:g}"))
        return default
    return number


def _targets(
    raw: Any, known: Mapping[str, list[str]], policy: Policy, errors: list[FieldError]
) -> list[dict[str, Any]]:
    """The targets, each {queue, percentile, max_wait (seconds)}."""
    if not isinstance(raw, list) or not raw:
        errors.append(
            FieldError(
                "targets",
                "required",
                "give at least one target: {queue, percentile, max_wait}, e.g. "
                "training-large, 90, 1h",
            )
        )
        return []
    if len(raw) > MAX_TARGETS:
        errors.append(FieldError("targets", "too-many", f"give at most {MAX_TARGETS} targets"))
        return []
    targets: list[dict[str, Any]] = []
    seen: dict[str, tuple[int, float]] = {}
    for i, entry in enumerate(raw):
        path = f"targets[{i}]"
        if not isinstance(entry, Mapping):
            errors.append(FieldError(path, "type", "must be {queue, percentile, max_wait}"))
            continue
        unknown = sorted(set(entry) - set(TARGET_KEYS))
        if unknown:
            errors.append(
                FieldError(
                    f"{path}.{unknown[0]}",
                    "unknown-field",
                    f"is not a known field; expected one of: {', '.join(TARGET_KEYS)}",
                )
            )
            continue
        queue = str(entry.get("queue") or "").strip()
        if not queue:
            errors.append(FieldError(f"{path}.queue", "required", "name a queue class or queue"))
        elif queue not in known and queue not in policy.cluster_queues:
            names = sorted(known) + sorted(policy.cluster_queues)
            errors.append(
                FieldError(
                    f"{path}.queue",
                    "unknown-queue",
                    f"no queue class or ClusterQueue named {queue!r} (there are: "
                    f"{', '.join(names[:16]) or 'none'})",
                )
            )
        percentile = _number(
            f"{path}.percentile", entry.get("percentile"), DEFAULT_PERCENTILE, 1, 100, errors
        )
        reader = Reader()
        max_wait = read_seconds(reader, f"{path}.max_wait", entry.get("max_wait"), required=True)
        errors.extend(reader.errors)
        if queue in seen and seen[queue][1] != percentile:
            errors.append(
                FieldError(
                    f"{path}.percentile",
                    "one-percentile-per-queue",
                    f"targets[{seen[queue][0]}] asks for p{seen[queue][1]:g} of {queue}; "
                    "give one percentile per queue",
                )
            )
        seen.setdefault(queue, (i, percentile))
        if queue and max_wait is not None:
            targets.append({"queue": queue, "percentile": percentile, "max_wait": max_wait})
    return targets


def _flavors(raw: Any, policy: Policy, errors: list[FieldError]) -> list[str]:
    """The flavors to size (default: every flavor with GPU quota)."""
    offered = capacity_flavors(policy)
    if raw is None or raw == [] or raw == "":
        if not offered:
            errors.append(FieldError("flavors", "no-gpu-quota", "no flavor has GPU quota"))
        return offered
    names = [raw] if isinstance(raw, str) else raw
    if not isinstance(names, list):
        errors.append(FieldError("flavors", "type", "must be a list of flavor names"))
        return []
    chosen: list[str] = []
    for i, name in enumerate(names):
        if name not in offered:
            errors.append(
                FieldError(
                    f"flavors[{i}]",
                    "unknown-flavor",
                    f"{name!r} is not a flavor with GPU quota (there are: "
                    f"{', '.join(offered) or 'none'})",
                )
            )
        elif name not in chosen:
            chosen.append(name)
    return chosen


# ----------------------------------------------------------------- checking


@dataclass
class Checked:
    """A plan's inputs, checked; ``stream`` is built when it runs."""

    source: str
    policy: Policy
    stream: Callable[[], Stream]
    count: int
    request: dict[str, Any]
    baseline: dict[str, Any] = field(default_factory=dict)
    window_start: datetime | None = None
    window_end: datetime | None = None
    scenario: str = ""


def _scenario_policy(text: str) -> tuple[Any, list[dict[str, Any]]]:
    if not text.strip():
        raise PolicyInvalid.single("scenario", "required", "paste or upload a scenario file")
    if len(text.encode("utf-8")) > MAX_SCENARIO_BYTES:
        raise PolicyInvalid.single(
            "scenario", "too-large", f"is more than {MAX_SCENARIO_BYTES // 2**20} MiB of YAML"
        )
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PolicyInvalid.single("scenario", "yaml", str(exc).splitlines()[0]) from exc
    if not isinstance(document, dict):
        raise PolicyInvalid.single("scenario", "type", "must be a YAML mapping")
    try:
        parsed = parse(document, "the scenario")
    except ScenarioError as exc:
        raise PolicyInvalid(
            [FieldError("scenario", e.rule, f"{e.field}: {e.message}") for e in exc.errors]
        ) from exc
    entries = document.get("clusterQueues")
    objects = [
        {**e, "kind": "ClusterQueue"}
        for e in (entries if isinstance(entries, list) else [])
        if isinstance(e, dict)
    ]
    return parsed, objects


def check(
    body: Mapping[str, Any],
    *,
    baseline: dict[str, Any] | None = None,
    classes: Mapping[str, list[str]] | None = None,
    now: datetime | None = None,
) -> Checked:
    """Check a plan request; PolicyInvalid names every field at fault.
    ``baseline``/``classes``: the policy document and queue classes to plan
    on (default: the policy in Postgres now)."""
    errors: list[FieldError] = []
    unknown = sorted(set(body) - set(REQUEST_KEYS))
    if unknown:
        raise PolicyInvalid(
            [
                FieldError(key, "unknown-field", f"expected one of: {', '.join(REQUEST_KEYS)}")
                for key in unknown
            ]
        )
    source = str(body.get("source") or WhatIfSource.WINDOW)
    if source not in WhatIfSource.values:
        raise PolicyInvalid.single(
            "source", "unsupported-value", f"use one of {', '.join(WhatIfSource.values)}"
        )
    scenario_text = str(body.get("scenario") or "")
    start = end = None
    if source == WhatIfSource.SCENARIO:
        parsed, objects = _scenario_policy(scenario_text)
        policy, classes, baseline = parsed.policy, queue_classes(objects), {}
        count = scenario_size(parsed)
        if count == 0:
            errors.append(FieldError("scenario", "no-workloads", "has no workloads to replay"))

        def stream() -> Stream:
            return scenario_stream(parsed)
    else:
        if baseline is None or classes is None:
            objects = desired_objects()
            baseline = to_document(objects)
            if baseline.get("topologies"):  # gangs placed on the nodes sync last saw
                baseline["nodes"] = observed_nodes()
            classes = queue_classes(objects)
        try:
            policy = parse(baseline, "today's policy").policy
        except ScenarioError as exc:
            raise PolicyInvalid(
                [FieldError("policy", e.rule, f"{e.field}: {e.message}") for e in exc.errors]
            ) from exc
        start, end, count = read_window(
            body.get("window_start"), body.get("window_end"), now, errors, DEFAULT_WINDOW
        )
        window = (start, end)

        def stream() -> Stream:
            first, last = window
            assert first is not None and last is not None  # else the plan was refused
            return window_stream(first, last, policy)()

    seeds = _number("seeds", body.get("seeds"), DEFAULT_SEEDS, 1, MAX_SEEDS, errors)
    if seeds != int(seeds):
        errors.append(FieldError("seeds", "whole-number", "must be a whole number"))
    growth = _number("growth", body.get("growth"), 1.0, 1.0, MAX_GROWTH, errors)
    if count * growth > MAX_PLAN_WORKLOADS:
        errors.append(
            FieldError(
                "window_start" if source == WhatIfSource.WINDOW else "scenario",
                "too-many-workloads",
                f"{count:,} workloads × growth {growth:g} is more than the "
                f"{MAX_PLAN_WORKLOADS:,} a plan replays: choose a shorter window",
            )
        )
    targets = _targets(body.get("targets"), classes, policy, errors)
    flavors = _flavors(body.get("flavors"), policy, errors)
    if not errors and start is not None and end is not None:
        _targets_have_workloads(targets, classes, start, end, errors)
    if errors:
        raise PolicyInvalid(errors)
    return Checked(
        source=source,
        policy=policy,
        stream=stream,
        count=count,
        request={
            "targets": targets,
            "flavors": flavors,
            "classes": dict(classes),
            "groups": _groups(policy, classes, targets),
            "seeds": int(seeds),
            "growth": growth,
        },
        baseline=baseline,
        window_start=start,
        window_end=end,
        scenario=scenario_text if source == WhatIfSource.SCENARIO else "",
    )


def _targets_have_workloads(
    targets: list[dict[str, Any]],
    classes: Mapping[str, list[str]],
    start: datetime,
    end: datetime,
    errors: list[FieldError],
) -> None:
    """A target whose queues had no workloads in the window has no wait to
    plan for: no capacity could be said to meet it."""
    for i, target in enumerate(targets):
        queues = classes.get(target["queue"]) or [target["queue"]]
        if not window_records(start, end).filter(cluster_queue__in=queues).exists():
            errors.append(
                FieldError(
                    f"targets[{i}].queue",
                    "no-workloads",
                    f"{target['queue']} ({', '.join(queues)}) had no workloads created in "
                    "the window: there is no wait to plan for",
                )
            )


# ----------------------------------------------------------------- the plans


def create_plan(actor: Any, body: Mapping[str, Any]) -> CapacityPlan:
    """Check the request (nothing is stored when PolicyInvalid is raised),
    store the plan with today's policy, and queue it after the commit."""
    checked = check(body)
    version = policy_version() if checked.source == WhatIfSource.WINDOW else None
    with transaction.atomic():
        plan = CapacityPlan.objects.create(
            created_by=actor if getattr(actor, "is_authenticated", False) else None,
            source=checked.source,
            window_start=checked.window_start,
            window_end=checked.window_end,
            scenario=checked.scenario,
            baseline=checked.baseline,
            policy_version=version,
            request=checked.request,
            workloads=checked.count,
        )
        after_commit(RUN_CAPACITY_PLAN, plan.pk, stored=f"capacity plan {plan.pk}: stored")
    return plan


def _checked_again(plan: CapacityPlan) -> Checked:
    """The plan's inputs, checked again as they were asked for (the policy
    stored with it; the window's workloads as they are now)."""
    request = plan.request
    body = {
        "source": plan.source,
        "targets": request.get("targets"),
        "flavors": request.get("flavors"),
        "seeds": request.get("seeds"),
        "growth": request.get("growth"),
    }
    if plan.source == WhatIfSource.SCENARIO:
        return check({**body, "scenario": plan.scenario})
    return check(
        {**body, "window_start": plan.window_start, "window_end": plan.window_end},
        baseline=plan.baseline,
        classes=request.get("classes") or {},
    )


class _Progress:
    """The plan's progress (``ProgressWriter``) from replays done out of the
    estimate; 100% is written when it is closed, so a search past its
    estimate stays at 99% (and still says it is alive)."""

    def __init__(
        self,
        plan_id: int,
        every: float = PROGRESS_EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.write = ProgressWriter(plan_id, model=CapacityPlan, every=every, clock=clock)

    def __call__(self, done: int, total: int) -> None:
        self.write(min(99, 100 * done // max(total, 1)))


def search_request(checked: Checked, stream: Stream) -> Request:
    request = checked.request
    return Request(
        policy=checked.policy,
        load=Load(
            build=stream.build,
            horizon=stream.horizon,
            context=stream.context,
            eviction_delay=stream.eviction_delay,
            requeue_delay=stream.requeue_delay,
            check_delays=stream.check_delays,
        ),
        groups={name: tuple(queues) for name, queues in request["groups"].items()},
        targets=[Target(t["queue"], t["percentile"], t["max_wait"]) for t in request["targets"]],
        flavors=list(request["flavors"]),
        seeds=request["seeds"],
        perturbation=Perturbation(growth=request["growth"]),
        resource=GPU,
    )


def _workers(count: int) -> int:
    """How many workers a plan of ``count`` workloads shares its replays out
    among: 1 (replayed here) under BERTH_REPLAY_SPLIT_MIN workloads, where a
    replay takes less than handing it over does."""
    if count < settings.BERTH_REPLAY_SPLIT_MIN:
        return 1
    return replay_workers()


def run_search(
    checked: Checked,
    progress: Callable[[int, int], None] | None = None,
    plan_id: int | None = None,
) -> dict[str, Any]:
    """Build the stream, search, and the result as stored (with the stream's
    notes). A stored plan (``plan_id``) with workers to spare shares its
    replays out among them (``whatif.plan_scaleout``), with the same result."""
    stream = checked.stream()
    started = time.monotonic()
    request = search_request(checked, stream)
    workers = _workers(stream.count) if plan_id is not None else 1
    if plan_id is not None and workers > 1:
        result = search_apart(plan_id, request, workers, progress)
    else:
        result = Search(request, progress).run()
    result["seconds"] = time.monotonic() - started
    result["workloads"] = stream.count
    result["notes"] = stream.notes
    result["groups"] = checked.request["groups"]
    return dict(_clean(result))


def _finish(plan_id: int, state: WhatIfState, **fields: Any) -> str:
    closed = CapacityPlan.objects.filter(pk=plan_id, state=WhatIfState.RUNNING).update(
        state=state, finished_at=timezone.now(), **fields
    )
    return state.value if closed else "lost"


def execute_plan(plan_id: int) -> str:
    """Claim a queued plan (compare-and-set: a second delivery changes
    nothing), search, and close it. Returns the state it ended in, or
    ``skipped``."""
    now = timezone.now()
    claimed = CapacityPlan.objects.filter(pk=plan_id, state=WhatIfState.QUEUED).update(
        state=WhatIfState.RUNNING, started_at=now, heartbeat_at=now, progress=0
    )
    if not claimed:
        return "skipped"
    plan = CapacityPlan.objects.defer("replay_inputs").get(pk=plan_id)
    try:
        result = run_search(_checked_again(plan), _Progress(plan_id), plan_id)
    except PolicyInvalid as exc:
        message = "\n".join(f"{e.field}: {e.message}" for e in exc.errors)
        return _finish(plan_id, WhatIfState.FAILED, error=f"the plan can no longer run:\n{message}")
    except ReplayFailed as exc:  # shared out: a replay it asked for failed
        return _finish(plan_id, WhatIfState.FAILED, error=f"the search failed: {exc}")
    except PlanEnded:  # closed under it (taken for lost): nothing more to write
        return "lost"
    except Exception as exc:  # a plan must end, whatever went wrong
        log.exception("capacity plan %s failed", plan_id)
        return _finish(plan_id, WhatIfState.FAILED, error=f"the search failed: {exc!r}")
    return _finish(
        plan_id, WhatIfState.SUCCEEDED, result=result, progress=100, workloads=result["workloads"]
    )
