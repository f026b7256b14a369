"""Retrying what may succeed a moment later: 409, 429, 5xx, timeouts, refused
connections. Exponential backoff with full jitter, so a crowd of clients does not
retry in step."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from queues.backends.base import BackendError

T = TypeVar("T")


def with_retries(
    fn: Callable[[], T],
    *,
    attempts: int = 5,
    base: float = 0.5,
    cap: float = 10.0,
    on_retry: Callable[[BackendError], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    for attempt in range(attempts):
        try:
            return fn()
        except BackendError as exc:
            if not exc.transient or attempt == attempts - 1:
                raise
            if on_retry is not None:
                on_retry(exc)
            wait = random.uniform(0, min(cap, base * 2**attempt))
            # The server's Retry-After is a floor (within the cap), not a suggestion.
            sleep(max(wait, min(cap, exc.retry_after or 0.0)))
    raise AssertionError("unreachable")  # pragma: no cover
