"""The chaos tests share the jobs tests' demo organisation, and print their
counts at the end of the run."""

from __future__ import annotations

from typing import Any

from tests.chaos.figures import lines
from tests.jobs.conftest import org

__all__ = ["org"]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    found = lines()
    if found:
        terminalreporter.section("chaos figures")
        for line in found:
            terminalreporter.write_line(line)
