"""Copies and pickles of the engine's frozen dataclasses.

Compiled with mypyc (``queues.engine.compiled``), a frozen dataclass is
restored field by field after it is made, which its frozenness refuses. So
each is rebuilt by calling it with its fields instead, through ``copyreg``,
which both ``copy.deepcopy`` (a rehearsal's copy of the scheduler) and
``pickle`` (a replay's results sent back by a worker) consult. Pure Python
gives the same copies either way.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import copyreg
import dataclasses
from typing import Any


def by_fields(obj: Any) -> tuple[type, tuple[Any, ...]]:
    return type(obj), tuple(getattr(obj, field.name) for field in dataclasses.fields(obj))


def rebuilt_by_fields(*classes: type) -> None:
    for cls in classes:
        if any(not field.init for field in dataclasses.fields(cls)):
            raise TypeError(f"{cls.__name__} has fields its constructor does not take")
        copyreg.pickle(cls, by_fields)
