"""What-if runs: read and check the form, create the run, execute it once
(two simulations on one stream, with progress), and store the comparison."""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from cluster.pace import cluster_pace
from cluster.state import observed_nodes
from queues.deferred import after_commit
from queues.engine.groups import independent_groups
from queues.engine.model import Policy
from queues.engine.scenario import ScenarioError, parse
from queues.errors import FieldError, PolicyInvalid
from queues.reconcile import desired_objects, policy_version
from whatif.figures import Apart, compare
from whatif.models import CapacityPlan, WhatIfRun, WhatIfSource, WhatIfState
from whatif.proposal import (
    ALIVE_EVERY_SECONDS,
    CHANGE_KEYS,
    DEFAULT_WINDOW,
    MAX_SCENARIO_BYTES,
    MAX_WORKLOADS,
    PROGRESS_EVERY_SECONDS,
    QUOTA_FIELDS,
    Change,
    policy_document,
    proposal_policy,
)
from whatif.scaleout import PartFailed, replay_apart, replay_workers
from whatif.stream import (
    Stream,
    recorded_stream,
    scenario_size,
    scenario_stream,
    window_records,
)

log = logging.getLogger(__name__)
RUN_WHATIF = "jobs.tasks.run_whatif"

# ------------------------------------------------------------------- reading


def _read_scenario(text: str) -> tuple[Any, list[FieldError]]:
    if not text.strip():
        return None, [FieldError("scenario", "required", "paste or upload a scenario file")]
    if len(text.encode("utf-8")) > MAX_SCENARIO_BYTES:
        return None, [
            FieldError(
                "scenario", "too-large", f"is more than {MAX_SCENARIO_BYTES // 2**20} MiB of YAML"
            )
        ]
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        return None, [FieldError("scenario", "yaml", where + str(exc).splitlines()[0])]
    if not isinstance(document, dict):
        return None, [
            FieldError("scenario", "type", "must be a YAML mapping (see docs/scenarios.md)")
        ]
    return document, []


def _scenario_errors(exc: ScenarioError) -> list[FieldError]:
    return [FieldError("scenario", e.rule, f"{e.field}: {e.message}") for e in exc.errors]


def _moment(name: str, value: str | datetime | None) -> tuple[datetime | None, list[FieldError]]:
    if value is None or value == "":
        return None, []
    if isinstance(value, datetime):
        moment = value
    else:
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            return None, [
                FieldError(name, "format", f"{value!r} is not a date and time (YYYY-MM-DDTHH:MM)")
            ]
    if timezone.is_naive(moment):
        moment = moment.replace(tzinfo=UTC)  # the page's times are UTC
    return moment, []


def parse_changes(rows: Iterable[Mapping[str, Any]]) -> list[tuple[int, Change]]:
    """Form rows as changes with their row numbers; blank rows are skipped but
    keep their numbers, so errors point at the row the admin sees."""
    changes = []
    for k, row in enumerate(rows):
        values = {key: str(row.get(key) or "").strip() for key in CHANGE_KEYS}
        if not any(values.values()):
            continue
        if values["field"] not in QUOTA_FIELDS:
            values["flavor"] = values["resource"] = ""
        changes.append((k, Change(**values)))
    return changes


def today_document() -> tuple[dict[str, Any], int]:
    """The policy in Postgres now, as a document, and its version."""
    document = policy_document(desired_objects())
    if document.get("topologies"):  # gangs placed on the nodes sync last saw
        document["nodes"] = observed_nodes()
    return document, policy_version()


@dataclass
class Prepared:
    """Everything a run needs, checked."""

    source: WhatIfSource
    today: Policy
    proposal: Policy
    count: int  # workloads in the stream
    stream: Callable[[], Stream]  # built when the run runs: a window's can be large
    baseline: dict[str, Any]
    window_start: datetime | None = None
    window_end: datetime | None = None
    scenario_text: str = ""


def prepare(
    *,
    source: str,
    changes: list[tuple[int, Change]],
    window_start: str | datetime | None = None,
    window_end: str | datetime | None = None,
    scenario: str = "",
    baseline: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> Prepared:
    """Check a what-if request; raise PolicyInvalid naming every field at fault.
    ``baseline``: the policy document to start from for a window (default: the
    policy in Postgres now)."""
    errors: list[FieldError] = []
    if source not in WhatIfSource.values:
        raise PolicyInvalid.single(
            "source", "unsupported-value", f"use one of {', '.join(WhatIfSource.values)}"
        )
    if not changes:
        errors.append(
            FieldError(
                "changes",
                "required",
                "add at least one change: the proposal is today's policy with your changes",
            )
        )
    if source == WhatIfSource.SCENARIO:
        return _prepare_scenario(scenario, changes, errors)
    start, end, count = _checked_window(window_start, window_end, now, errors)
    if baseline is None:
        baseline, _ = today_document()
    today = _today_policy(baseline, errors)
    proposal = _proposal_or_errors(baseline, changes, "today's policy", errors)
    if errors or proposal is None or start is None or end is None:
        raise PolicyInvalid(errors)
    return Prepared(
        WhatIfSource.WINDOW,
        today,
        proposal,
        count,
        window_stream(start, end, today),
        baseline=baseline,
        window_start=start,
        window_end=end,
    )


def _prepare_scenario(
    scenario: str, changes: list[tuple[int, Change]], errors: list[FieldError]
) -> Prepared:
    """A scenario run, checked: the file, the size of its stream, and the
    proposal on its policy. ``errors``: what is already wrong with the request."""
    document, problems = _read_scenario(scenario)
    if problems:
        raise PolicyInvalid(problems + errors)
    try:
        parsed = parse(document, "the scenario")
    except ScenarioError as exc:
        raise PolicyInvalid(_scenario_errors(exc) + errors) from exc
    size = scenario_size(parsed)
    if size == 0:
        errors.append(FieldError("scenario", "no-workloads", "has no workloads to replay"))
    elif size > MAX_WORKLOADS:
        errors.append(
            FieldError(
                "scenario",
                "too-many-workloads",
                f"has {size:,} workloads; a what-if replays at most {MAX_WORKLOADS:,}",
            )
        )
    proposal = _proposal_or_errors(document, changes, "the scenario", errors)
    if errors or proposal is None:
        raise PolicyInvalid(errors)
    return Prepared(
        WhatIfSource.SCENARIO,
        parsed.policy,
        proposal,
        size,
        lambda: scenario_stream(parsed),
        baseline={},
        scenario_text=scenario,
    )


def _checked_window(
    window_start: str | datetime | None,
    window_end: str | datetime | None,
    now: datetime | None,
    errors: list[FieldError],
) -> tuple[datetime | None, datetime | None, int]:
    """The window asked for (by default the DEFAULT_WINDOW up to now) and how
    many workloads were created in it, at most MAX_WORKLOADS; what is wrong
    with it goes to ``errors``, its unreadable moments first."""
    start, end, count = read_window(window_start, window_end, now, errors)
    if count > MAX_WORKLOADS:
        errors.append(
            FieldError(
                "window_start",
                "too-many-workloads",
                f"{count:,} workloads were created in this window; a what-if replays "
                f"at most {MAX_WORKLOADS:,}: choose a shorter window",
            )
        )
    return start, end, count


def read_window(
    window_start: str | datetime | None,
    window_end: str | datetime | None,
    now: datetime | None,
    errors: list[FieldError],
    default: timedelta = DEFAULT_WINDOW,
) -> tuple[datetime | None, datetime | None, int]:
    """The window asked for (by default ``default`` up to now) and how many
    workloads were created in it (none is an error); what is wrong with it
    goes to ``errors``, its unreadable moments first."""
    start, start_errors = _moment("window_start", window_start)
    end, end_errors = _moment("window_end", window_end)
    errors[:0] = start_errors + end_errors
    if start_errors or end_errors:
        return start, end, 0
    end = end or now or timezone.now()
    start = start or end - default
    if start >= end:
        errors.append(FieldError("window_end", "after-start", "must be after the start"))
        return start, end, 0
    count = window_records(start, end).count()
    if count == 0:
        errors.append(
            FieldError(
                "window_start",
                "no-workloads",
                f"no workloads were created between {start:%Y-%m-%d %H:%M} and "
                f"{end:%Y-%m-%d %H:%M} UTC",
            )
        )
    return start, end, count


def _today_policy(baseline: Mapping[str, Any], errors: list[FieldError]) -> Policy:
    try:
        return parse(baseline, "today's policy").policy
    except ScenarioError as exc:  # the stored policy always loads; say so if not
        errors.extend(FieldError("policy", e.rule, f"{e.field}: {e.message}") for e in exc.errors)
        raise PolicyInvalid(errors) from exc


def window_stream(start: datetime, end: datetime, today: Policy) -> Callable[[], Stream]:
    """The window's stream, read only when the run runs (a window's can be
    large), at the pace the cluster runs at then."""

    def stream() -> Stream:
        pace = cluster_pace()
        return recorded_stream(
            start,
            end,
            today,
            observed=timezone.now(),
            speedup=pace.speedup,
            eviction_delay=pace.eviction_delay,
            requeue_delay=pace.requeue_delay,
        )

    return stream


def _proposal_or_errors(
    document: Mapping[str, Any],
    changes: list[tuple[int, Change]],
    where: str,
    errors: list[FieldError],
) -> Policy | None:
    if not changes:
        return None
    try:
        return proposal_policy(document, changes, where)
    except PolicyInvalid as exc:
        errors.extend(exc.errors)
        return None


# ------------------------------------------------------------------ the runs


def create_run(
    actor: Any,
    *,
    source: str,
    changes: Iterable[Mapping[str, Any]],
    window_start: str | datetime | None = None,
    window_end: str | datetime | None = None,
    scenario: str = "",
) -> WhatIfRun:
    """Check the request (PolicyInvalid names every field at fault; nothing is
    stored then), store the run with today's policy, and queue the simulation
    after the commit."""
    numbered = parse_changes(changes)
    baseline, version = today_document() if source == WhatIfSource.WINDOW else ({}, None)
    prepared = prepare(
        source=source,
        changes=numbered,
        window_start=window_start,
        window_end=window_end,
        scenario=scenario,
        baseline=baseline if source == WhatIfSource.WINDOW else None,
    )
    with transaction.atomic():
        run = WhatIfRun.objects.create(
            created_by=actor if getattr(actor, "is_authenticated", False) else None,
            source=prepared.source,
            window_start=prepared.window_start,
            window_end=prepared.window_end,
            scenario=prepared.scenario_text,
            baseline=prepared.baseline,
            policy_version=version,
            changes=[change.as_dict() for _, change in numbered],
            workloads=prepared.count,
        )
        after_commit(RUN_WHATIF, run.pk, stored=f"what-if run {run.pk}: stored")
    return run


class ProgressWriter:
    """Writes a run's (or, with ``model``, a capacity plan's) progress at most
    every ``every`` seconds, and its heartbeat at least every
    ALIVE_EVERY_SECONDS while called, only while it is still running
    (compare-and-set): one closed meanwhile stays closed."""

    def __init__(
        self,
        run_id: int,
        *,
        model: type[WhatIfRun] | type[CapacityPlan] = WhatIfRun,
        every: float = PROGRESS_EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.run_id = run_id
        self.model = model
        self.every = every
        self.clock = clock
        self.last = -math.inf
        self.written = 0

    def __call__(self, percent: int) -> None:
        now = self.clock()
        rising = percent > self.written and now - self.last >= self.every
        if not rising and now - self.last < ALIVE_EVERY_SECONDS:
            return
        self.last = now
        self.written = max(self.written, percent)
        self.model.objects.filter(pk=self.run_id, state=WhatIfState.RUNNING).update(
            progress=self.written, heartbeat_at=timezone.now()
        )


def write_so_far(run_id: int) -> Callable[[dict[str, Any]], None]:
    """Stores a run's figures so far while it is still running (compare-and-set:
    a run closed meanwhile keeps its final result)."""

    def write(figures: dict[str, Any]) -> None:
        WhatIfRun.objects.filter(pk=run_id, state=WhatIfState.RUNNING).update(
            result=figures, heartbeat_at=timezone.now()
        )

    return write


def prepared_for(run: WhatIfRun) -> Prepared:
    """The run's inputs again, as checked when it was asked for; the window's
    workloads as they are now. Raises PolicyInvalid if they no longer hold."""
    changes = parse_changes(run.changes)
    if run.source == WhatIfSource.SCENARIO:
        return prepare(source=run.source, changes=changes, scenario=run.scenario)
    return prepare(
        source=run.source,
        changes=changes,
        window_start=run.window_start,
        window_end=run.window_end,
        baseline=run.baseline,
    )


def _finish(run_id: int, state: WhatIfState, **fields: Any) -> str:
    closed = WhatIfRun.objects.filter(pk=run_id, state=WhatIfState.RUNNING).update(
        state=state, finished_at=timezone.now(), **fields
    )
    return state.value if closed else "lost"


def _shared_out(run_id: int, prepared: Prepared, stream: Stream) -> Apart | None:
    """Replays big enough and in more than one independent group are shared
    out among the workers (``whatif.scaleout``), when there are several."""
    if stream.count < settings.BERTH_REPLAY_SPLIT_MIN:
        return None
    if all(
        len(set(independent_groups(policy).values())) < 2
        for policy in (prepared.today, prepared.proposal)
    ):
        return None
    parts = replay_workers()
    if parts < 2:
        return None
    return functools.partial(replay_apart, run_id, parts=parts)


def execute(run_id: int) -> str:
    """Claim a queued run (compare-and-set: a second delivery of a run that is
    running or done changes nothing), simulate, and close it. Returns the
    state it ended in, or ``skipped``."""
    now = timezone.now()
    claimed = WhatIfRun.objects.filter(pk=run_id, state=WhatIfState.QUEUED).update(
        state=WhatIfState.RUNNING, started_at=now, heartbeat_at=now, progress=0
    )
    if not claimed:
        return "skipped"
    run = WhatIfRun.objects.get(pk=run_id)
    try:
        prepared = prepared_for(run)
        stream = prepared.stream()
        WhatIfRun.objects.filter(pk=run_id, state=WhatIfState.RUNNING).update(
            workloads=stream.count
        )
        result = compare(
            prepared.today,
            prepared.proposal,
            stream,
            ProgressWriter(run_id),
            so_far=write_so_far(run_id),
            apart=_shared_out(run_id, prepared, stream),
        )
        if not prepared.proposal.fair_sharing and any(
            c.get("field") == "fair_sharing_weight" for c in run.changes
        ):
            result["notes"].append(
                "Fair sharing is off (Kueue's configuration enables it, not the policy), so "
                "fair-sharing weights change nothing in this replay."
            )
    except PolicyInvalid as exc:
        message = "\n".join(f"{e.field}: {e.message}" for e in exc.errors)
        return _finish(run_id, WhatIfState.FAILED, error=f"the run can no longer start:\n{message}")
    except PartFailed as exc:  # shared out: one part's replay failed
        return _finish(run_id, WhatIfState.FAILED, error=f"the simulation failed: {exc}")
    except Exception as exc:  # a run must end, whatever went wrong
        log.exception("what-if run %s failed", run_id)
        return _finish(run_id, WhatIfState.FAILED, error=f"the simulation failed: {exc!r}")
    return _finish(run_id, WhatIfState.SUCCEEDED, result=result, progress=100)


def describe_changes(changes: Iterable[Mapping[str, Any]]) -> list[str]:
    return [change.describe() for _, change in parse_changes(changes)]
