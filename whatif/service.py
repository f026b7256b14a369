"""What-if: replay a window of recorded workloads (or a scenario file) through
the admission engine under today's policy and under a proposal (today's with
some ClusterQueue fields changed), on exactly the same stream, and compare.

``create_run`` (the page) checks everything a run needs, stores the policy as
it is now and queues the run after the commit; ``execute`` (the Celery task)
claims a queued run once, runs the simulator twice, writing progress as it
goes, and stores the figures or the error. ``proposal`` edits the policy,
``stream`` builds what is replayed (from what ``window_history`` reads of the
records), ``figures`` replays it and compares, ``runs`` does the rest. This
module is what pages and the task call.
"""

from whatif.figures import compare
from whatif.proposal import (
    CHANGE_KEYS,
    DEFAULT_RUNTIME_SECONDS,
    DEFAULT_WINDOW,
    FIELDS,
    MAX_SCENARIO_BYTES,
    MAX_WORKLOADS,
    queue_summary,
)
from whatif.runs import (
    ProgressWriter,
    create_run,
    describe_changes,
    execute,
    prepared_for,
    today_document,
)

__all__ = [
    "CHANGE_KEYS",
    "DEFAULT_RUNTIME_SECONDS",
    "DEFAULT_WINDOW",
    "FIELDS",
    "MAX_SCENARIO_BYTES",
    "MAX_WORKLOADS",
    "ProgressWriter",
    "compare",
    "create_run",
    "describe_changes",
    "execute",
    "prepared_for",
    "queue_summary",
    "today_document",
]
