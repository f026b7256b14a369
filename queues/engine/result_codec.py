"""A replay's result as JSON and back, exactly: what a worker that replayed
one group of a split replay sends back to be merged (``queues.engine.split``);
and as columns (``to_columns``), for a process that pickles it to another.

JSON has no tuple keys and PostgreSQL's JSON no infinities, so flavor ×
resource keys become ``[flavor, resource, value]`` rows and a float that is
not finite becomes the string ``"inf"``, ``"-inf"`` or ``"nan"``. Python
writes floats as their shortest exact repr, so every number comes back equal.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from queues.engine.model import FlavorResource
from queues.engine.replay_records import SimulationResult, WorkloadRecord
from queues.engine.usage_meter import QueueRates, QueueTotals

_RECORD_FIELDS = tuple(f.name for f in dataclasses.fields(WorkloadRecord))


def _number(value: float | None) -> float | str | None:
    if value is None or math.isfinite(value):
        return value
    return str(value)


def _float(value: float | str | None) -> float | None:
    return None if value is None else float(value)


def _rows(amounts: dict[FlavorResource, Any]) -> list[list[Any]]:
    return [[flavor, resource, _number(v)] for (flavor, resource), v in amounts.items()]


def _amounts(rows: list[list[Any]]) -> dict[FlavorResource, Any]:
    return {(flavor, resource): value for flavor, resource, value in rows}


def _float_amounts(rows: list[list[Any]]) -> dict[FlavorResource, float]:
    return {(flavor, resource): float(value) for flavor, resource, value in rows}


def to_json(result: SimulationResult) -> dict[str, Any]:
    records = []
    for record in result.records.values():
        row = [getattr(record, name) for name in _RECORD_FIELDS]
        records.append([_number(v) if isinstance(v, float) else v for v in row])
    return {
        "start": _number(result.start),
        "end": _number(result.end),
        "horizon": _number(result.horizon),
        "records": records,
        "totals": {
            name: [_rows(t.used), _rows(t.borrowed), _rows(t.lent)]
            for name, t in result.totals.items()
        },
        "final_rates": {
            name: [_rows(r.used), _rows(r.borrowed), _rows(r.lent)]
            for name, r in result.final_rates.items()
        },
        "nominal": {name: _rows(n) for name, n in result.nominal.items()},
        "preemptions_by_reason": result.preemptions_by_reason,
        "preemptions_by_queue": result.preemptions_by_queue,
        "series": result.series,
        "cycles": result.cycles,
        "admissions": result.admissions,
        "livelocks": result.livelocks,
        "admission_log": [[q, at, wait] for q, at, wait in result.admission_log],
    }


def from_json(data: dict[str, Any]) -> SimulationResult:
    records: dict[str, WorkloadRecord] = {}
    for row in data["records"]:
        values = dict(zip(_RECORD_FIELDS, row, strict=True))
        for name in ("created", "first_admitted", "finished", "lost_seconds"):
            values[name] = _float(values[name])
        for name in ("lost_gpu_seconds", "timed_out", "requeue_limit_exceeded"):
            values[name] = _float(values[name])
        record = WorkloadRecord(**values)
        records[record.key] = record
    start, end = _float(data["start"]), _float(data["end"])
    assert start is not None and end is not None
    return SimulationResult(
        start=start,
        end=end,
        horizon=_float(data["horizon"]),
        records=records,
        totals={
            name: QueueTotals(*(_float_amounts(rows) for rows in kinds))
            for name, kinds in data["totals"].items()
        },
        final_rates={
            name: QueueRates(*(_float_amounts(rows) for rows in kinds))
            for name, kinds in data["final_rates"].items()
        },
        nominal={name: _amounts(rows) for name, rows in data["nominal"].items()},
        preemptions_by_reason=data["preemptions_by_reason"],
        preemptions_by_queue=data["preemptions_by_queue"],
        series=data["series"],
        cycles=data["cycles"],
        admissions=data["admissions"],
        livelocks=data["livelocks"],
        admission_log=[(q, at, wait) for q, at, wait in data["admission_log"]],
    )


def to_columns(result: SimulationResult) -> tuple[SimulationResult, list[list[Any]]]:
    """The result without its records, and the records as one list per
    field (``from_columns`` gives it back equal). Pickled, a column of
    numbers or strings is written whole, not one object's state at a time:
    a tree of 100,000 workloads sends its result from a worker process in a
    fifth of the time (``bench/tree_by_tree.py``)."""
    records = list(result.records.values())
    columns = [[getattr(record, name) for record in records] for name in _RECORD_FIELDS]
    return dataclasses.replace(result, records={}), columns


def from_columns(rest: SimulationResult, columns: list[list[Any]]) -> SimulationResult:
    records: dict[str, WorkloadRecord] = {}
    for row in zip(*columns, strict=True):
        record = WorkloadRecord(*row)
        records[record.key] = record
    return dataclasses.replace(rest, records=records)
