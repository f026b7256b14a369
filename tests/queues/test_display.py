"""One way to write a duration, a start estimate and Kueue's messages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from queues.display import (
    duration,
    gpu_hours,
    kueue_text,
    relative,
    start_estimate,
    taint,
    timestamp,
)

NOW = datetime(2026, 12, 1, 13, 8, 31, 669060, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (None, "—"),
        (0, "0 s"),
        (0.4, "0 s"),
        (10, "10 s"),
        (59.6, "1 min"),
        (270, "4 min 30 s"),
        (600, "10 min"),
        (7500, "2 h 5 min"),
        (100_000, "1 d 3 h"),  # 27 h 46 min in tables and 1 d 3 h in hovers, before
        (3 * 86400 + 60, "3 d"),  # never "3 d 1 min": adjacent units only
    ],
)
def test_durations(seconds: float | None, shown: str) -> None:
    assert duration(seconds) == shown


def test_times_and_relative_times() -> None:
    assert timestamp(NOW) == "2026-12-01 13:08:31 UTC"
    assert relative(NOW - timedelta(minutes=5), NOW) == "5 min ago"
    assert relative(NOW + timedelta(hours=2, minutes=10), NOW) == "in 2 h 10 min"
    assert relative(NOW, NOW) == "just now"


@pytest.mark.parametrize(
    ("earliest", "latest", "shown"),
    [
        (None, None, "not within 30 days (work ahead of it may declare no run time)"),
        (NOW, NOW, "now"),  # the dry run printed this as two identical ISO timestamps
        (NOW + timedelta(minutes=5), NOW + timedelta(minutes=20), "in 5 min – 20 min"),
        (NOW + timedelta(hours=1), None, "in 1 h or later"),
        (NOW - timedelta(minutes=1), NOW + timedelta(minutes=3), "in 0 s – 3 min"),
    ],
)
def test_start_estimates(earliest: datetime | None, latest: datetime | None, shown: str) -> None:
    assert start_estimate(earliest, latest, NOW) == shown


def test_taints_as_kubectl_writes_them() -> None:
    assert taint("berth.dev/spot", "true", "NoSchedule") == "berth.dev/spot=true:NoSchedule"
    assert taint("gpu", "", "NoExecute") == "gpu:NoExecute"
    message = (
        "couldn't assign flavors to pod set main: untolerated taint "
        "{berth.dev/spot true NoSchedule <nil>} in flavor h100-spot; "
        "untolerated taint {gpu  NoExecute <nil>} in flavor evicting"
    )
    assert kueue_text(message) == (
        "couldn't assign flavors to pod set main: untolerated taint "
        "berth.dev/spot=true:NoSchedule in flavor h100-spot; "
        "untolerated taint gpu:NoExecute in flavor evicting"
    )
    assert kueue_text("insufficient quota for nvidia.com/gpu") == (
        "insufficient quota for nvidia.com/gpu"
    )


@pytest.mark.parametrize(
    ("value", "shown"),
    [(None, "—"), (0, "0"), (0.001, "< 0.01"), (0.01, "0.01"), (2.5, "2.5"), (3.0, "3"),
     (12.54, "12.5"), (1234.0, "1,234")],
)  # fmt: skip
def test_gpu_hours(value: float | None, shown: str) -> None:
    assert gpu_hours(value) == shown


@pytest.mark.parametrize(
    ("seconds", "compact"),
    [(0, "0s"), (10, "10s"), (270, "4m30s"), (7500, "2h5m"), (100_000, "1d3h"), (259_260, "3d")],
)
def test_the_terminal_spelling_follows_the_same_rule(seconds: float, compact: str) -> None:
    """The CLI's table cells: one word each, the same value as the pages."""
    assert duration(seconds, compact=True) == compact
    assert duration(seconds).replace(" ", "").replace("min", "m") == compact


def test_the_cli_writes_durations_and_estimates_as_the_pages_do() -> None:
    from berth_cli.output import human_seconds, start_range

    assert human_seconds(100_000) == "1d3h"  # the pages' "1 d 3 h"
    now = datetime.now(UTC).replace(microsecond=0)
    assert start_range({"earliest": now.isoformat(), "latest": now.isoformat()}) == "now"
    assert start_range({"earliest": None, "latest": None}).startswith("not within 30 days")
