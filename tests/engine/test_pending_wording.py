"""A head left pending is told why in words only when they are read
(``Pending.worded``): made, compared, hashed, shown, copied and pickled, it
is the Pending worded at once (no database)."""

from __future__ import annotations

import copy
import pickle

from queues.engine.assign import refreshed
from queues.engine.outcomes import Pending
from queues.engine.scenario import parse
from queues.engine.scheduler import Scheduler
from tests.engine.test_nomination_reuse import GPU, cohort_job, cohort_queue


def test_a_pending_worded_when_read_is_the_one_worded_at_once() -> None:
    # 8 GPUs asked where 2 + 8 are, 4 of them taken: 2 short; with 5 read
    # since (one more taken), 3 short.
    scenario = parse(
        {
            "resourceFlavors": [{"name": "h100"}],
            "clusterQueues": [cohort_queue("q", 2), cohort_queue("other", 8)],
            "workloads": [cohort_job("first", "other", 4, 0), cohort_job("gang", "q", 8, 1)],
        }
    )
    first, gang = scenario.workloads
    scheduler = Scheduler(scenario.policy)
    scheduler.add(first)
    scheduler.cycle(now=0)
    assignment = scheduler.assign(gang)
    assert assignment.message().endswith("2 more needed")
    figures = {("h100", GPU): 5}
    eager = Pending("WaitingForQuota", refreshed(assignment, figures).message())
    assert eager.message.endswith("3 more needed")

    def lazy() -> Pending:
        return Pending.worded("WaitingForQuota", assignment, figures)

    assert lazy().message == eager.message
    assert lazy() == eager and eager == lazy()
    assert hash(lazy()) == hash(eager)
    assert (
        repr(lazy())
        == repr(eager)
        == f"Pending(reason='WaitingForQuota', message={eager.message!r})"
    )
    for copied in (pickle.loads(pickle.dumps(lazy())), copy.deepcopy(lazy()), copy.copy(lazy())):
        assert copied == eager and copied.message == eager.message
    # Sent as its words: not the assignment it was worded from.
    assert b"QuotaCheck" not in pickle.dumps(lazy())
    assert Pending.worded("WaitingForQuota", assignment, None).message == assignment.message()
    assert lazy() != Pending("WaitingForQuota", assignment.message())
    assert lazy() != Pending("NoFit", eager.message)
    assert lazy() != eager.message and lazy() is not None
    told = lazy()
    assert told == told and told.message is told.message  # worded once
