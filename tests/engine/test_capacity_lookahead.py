"""What a capacity search asks for next (``queues.engine.capacity_lookahead``),
so workers can replay ahead of it: the first replay it lists is always the
one the search asks for, the search answered by another replayer gives the
same answers, curve and replay count, and the replays listed behind it are
often the ones asked for later. No database."""

from __future__ import annotations

import pickle

import pytest

from queues.engine.capacity import Perturbation
from queues.engine.capacity_lookahead import asked_next, next_points
from queues.engine.capacity_search import (
    BEAT_EVERY_EVENTS,
    Figures,
    FrozenStream,
    Point,
    Request,
    Search,
    Target,
)
from tests.engine.test_capacity import request, steady

JITTERED = Perturbation(jitter=400, runtime_spread=0.4)


def jittered(nominal: int, seeds: int = 3) -> Request:
    return request(steady(nominal, count=80), seeds=seeds, perturbation=JITTERED)


class Recording:
    """Answers the search with real replays, and notes, before each, what
    the lookahead listed given what the search had been told so far."""

    def __init__(self, request: Request, limit: int) -> None:
        self.request = request
        self.limit = limit
        self.known: dict[Point, Figures] = {}
        self.asked: list[Point] = []
        self.listed: list[list[Point]] = []

    def __call__(self, point: Point) -> Figures:
        self.listed.append(next_points(self.request, self.known, self.limit))
        self.asked.append(point)
        figures = Search(self.request).replay(*point)
        self.known[point] = figures
        return figures


@pytest.mark.parametrize("nominal", [8, 16, 64])
def test_the_first_point_listed_is_the_one_asked_and_the_result_is_the_searchs_own(
    nominal: int,
) -> None:
    alone = Search(jittered(nominal))
    expected = alone.run()
    recording = Recording(jittered(nominal), limit=3)
    answered = Search(jittered(nominal), replayer=recording)
    assert answered.run() == expected
    assert answered.replays == alone.replays == len(recording.asked)
    assert [listed[0] for listed in recording.listed] == recording.asked
    # Once answered it asks for nothing more.
    assert next_points(recording.request, recording.known, 3) == []
    assert asked_next(recording.request, recording.known) is None


@pytest.mark.parametrize("nominal", [8, 16, 64])
def test_the_replays_listed_behind_are_often_asked_for_next(nominal: int) -> None:
    """Two workers: the one asked and one ahead. At least half the replays
    asked (the other seeds of a capacity, the next step of a gallop) were
    listed just before, so a worker could have had them ready."""
    recording = Recording(jittered(nominal), limit=2)
    Search(jittered(nominal), replayer=recording).run()
    pairs = list(zip(recording.listed, recording.asked[1:], strict=False))
    foreseen = [asked for listed, asked in pairs if asked in listed[1:]]
    assert len(recording.asked) >= 5
    assert 2 * len(foreseen) >= len(pairs), (recording.asked, recording.listed)


def test_a_longer_lookahead_lists_more_and_never_a_known_replay() -> None:
    req = jittered(16)
    known = {point: Search(req).replay(*point) for point in [("h100", 16, 0)]}
    two, six = next_points(req, known, 2), next_points(req, known, 6)
    assert two == six[:2] and len(six) > 2
    assert not set(six) & set(known)
    assert len(set(six)) == len(six)


def test_a_frozen_stream_gives_fresh_equal_copies_and_pickles() -> None:
    req = jittered(16)
    frozen = FrozenStream(req.load.build())
    first, second = frozen(), frozen()
    assert [w.key for w, _ in first] == [w.key for w, _ in second]
    assert first[0][0] is not second[0][0]
    again = pickle.loads(pickle.dumps(frozen))
    assert [w.key for w, _ in again()] == [w.key for w, _ in first]
    req.load.build = frozen
    copied = pickle.loads(pickle.dumps(req))
    assert Search(copied).run() == Search(jittered(16)).run()


def test_a_beat_is_called_while_a_replay_runs_and_may_stop_it() -> None:
    req = request(steady(8, count=3000), seeds=1, perturbation=JITTERED)
    target = Target("training-large", 90, 10**9)  # never fails: the replay runs whole
    req.targets = [target]
    beats: list[int] = []
    Search(req).replay("h100", 8, 0, beat=lambda: beats.append(1))
    assert beats

    class Stop(Exception):
        pass

    def stop() -> None:
        raise Stop

    with pytest.raises(Stop):
        Search(req).replay("h100", 8, 0, beat=stop)


def test_a_beat_comes_through_the_cycles_of_a_burst_too() -> None:
    # 1,400 jobs at once: 1,400 arrival events, then 1,400 cycles in that one
    # event time (one admission per queue and cycle), then 1,400 finishes.
    # Counting events alone beats once; the cycles make it twice.
    req = request(steady(4096, interval=0, gpus=1, count=1400))
    req.targets = [Target("training-large", 90, 10**9)]
    beats: list[int] = []
    Search(req).replay("h100", 4096, 0, beat=lambda: beats.append(1))
    assert len(beats) >= 3 * 1400 // BEAT_EVERY_EVENTS == 2
