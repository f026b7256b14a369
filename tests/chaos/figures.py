"""The chaos tests' counts, kept for the run's summary (``conftest.py``
prints them at the end, with or without ``-s``) and, when
``BERTH_CHAOS_FIGURES`` names a file, appended to it as JSON lines."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

FIGURES: list[tuple[str, dict[str, Any]]] = []


def report(part: str, **counts: Any) -> None:
    FIGURES.append((part, counts))
    target = os.environ.get("BERTH_CHAOS_FIGURES")
    if target:
        with Path(target).open("a", encoding="utf-8") as out:
            out.write(json.dumps({"part": part, **counts}) + "\n")


def lines() -> list[str]:
    return [
        f"{part}: " + ", ".join(f"{name}={value}" for name, value in counts.items())
        for part, counts in FIGURES
    ]
