"""What happens on a replay's clock: the kinds of event ``Simulator`` keeps
(arrivals wait in ``Arrivals``, the rest on its heap).

Each is ``Final``: compiled, a constant, not a module global looked up by
name at every event (a replay handles millions).

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from typing import Final

ARRIVE: Final = "arrive"
FINISH: Final = "finish"
UNPARK: Final = "unpark"
CHECK: Final = "check"
RETRY: Final = "retry"
RELEASE: Final = "release"
TIMEOUT: Final = "timeout"
PODS_READY: Final = "pods-ready"
PODS_TIMEOUT: Final = "pods-timeout"
REQUEUE: Final = "requeue"
SAMPLE: Final = "sample"
