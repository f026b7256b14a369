"""Garbage collection, run rarely while a replay runs.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """A replay allocates millions of short-lived objects among tens of thousands
    that live to the end; with the default threshold the collector walks those
    again and again (a fifth of a large replay), and putting every arrival on
    the clock and sorting the admissions at the end make a tuple a workload.
    The engine makes no reference cycles per event, so collecting rarely
    frees no less."""
    saved = gc.get_threshold()
    gc.set_threshold(100_000, 20, 100)
    try:
        yield
    finally:
        gc.set_threshold(*saved)
