"""Tables, YAML and JSON, and the small formats tables use (times, durations)."""

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import yaml

# --- output ------------------------------------------------------------------------


def emit(data: Any, output: str) -> None:
    if output == "json":
        print(json.dumps(data, indent=2, sort_keys=False, default=str))
    else:
        print(yaml.safe_dump(data, sort_keys=False, default_flow_style=False).rstrip("\n"))


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
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ") if moment else "-"


def human_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    total = max(0, round(seconds))
    if total < 60:
        return f"{total}s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s" if secs and minutes < 10 else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m" if minutes else f"{hours}h"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h" if hours else f"{days}d"


def age(value: Any, now: datetime | None = None) -> str:
    moment = parse_time(value)
    if moment is None:
        return "-"
    return human_seconds(((now or datetime.now(UTC)) - moment).total_seconds()) + " ago"


def start_range(estimate: Any) -> str:
    if not isinstance(estimate, dict):
        return "unknown"
    earliest, latest = parse_time(estimate.get("earliest")), parse_time(estimate.get("latest"))
    if earliest is None and latest is None:
        return "unknown (no estimate available)"
    now = datetime.now(UTC)

    def when(moment: datetime | None) -> str:
        if moment is None:
            return "?"
        delta = (moment - now).total_seconds()
        return format_time(moment.isoformat()) + (
            " (now)" if delta <= 60 else f" (in {human_seconds(delta)})"
        )

    if earliest == latest or latest is None:
        return when(earliest)
    return f"{when(earliest)} – {when(latest)}"


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
