"""What the simulated cluster keeps on its objects beyond Kubernetes' and
Kueue's own fields (annotations), and how it reads their times."""

from __future__ import annotations

from datetime import UTC, datetime

RUNTIME = "berth.dev/simulated-runtime-seconds"
STARTED = "berth.dev/simulated-started-at"
DONE = "berth.dev/simulated-work-done-seconds"
CHECKPOINT = "berth.dev/checkpoint-interval-seconds"
DEFAULT_RUNTIME = 600.0


def epoch(text: str | None, default: float) -> float:
    if not text:
        return default
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return default
