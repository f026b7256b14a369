"""Tables, YAML and JSON, and the small formats tables use (times, durations)."""

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from berth_cli import text, yaml_text

# --- output ------------------------------------------------------------------------


def emit(data: Any, output: str) -> None:
    if output == "json":
        print(json.dumps(data, indent=2, sort_keys=False, default=str))
    else:
        print(yaml_text.dump(data).rstrip("\n"))


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers], *[["" if c is None else str(c) for c in r] for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    )


def parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_time(value: Any) -> str:
    moment = parse_time(value)
    return text.timestamp(moment, compact=True) if moment else "-"


def human_seconds(seconds: float | None) -> str:
    """A duration by Berth's one rule, spelled for a terminal table: ``4m30s``."""
    return "-" if seconds is None else text.duration(seconds, compact=True)


def age(value: Any, now: datetime | None = None) -> str:
    moment = parse_time(value)
    if moment is None:
        return "-"
    return text.relative(moment, now or datetime.now(UTC), compact=True)


def start_range(estimate: Any) -> str:
    """When a pending job may start, in the words the dashboard uses."""
    if not isinstance(estimate, dict):
        return "unknown"
    earliest, latest = parse_time(estimate.get("earliest")), parse_time(estimate.get("latest"))
    return text.start_estimate(earliest, latest, datetime.now(UTC), compact=True)


def flavors_text(flavors: Any) -> str:
    if not isinstance(flavors, dict) or not flavors:
        return "-"
    parts = []
    for pod_set, resources in sorted(flavors.items()):
        if isinstance(resources, dict):
            assigned = ", ".join(f"{r}={f}" for r, f in sorted(resources.items()))
            parts.append(f"{pod_set}: {assigned}")
        else:
            parts.append(f"{pod_set}: {resources}")
    return "; ".join(parts)
