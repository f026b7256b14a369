"""Go durations as Kueue's configuration spells them: parsed as Go's
``time.ParseDuration`` parses them, written back in the shortest form Go reads,
described for pages. No database."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from queues.durations import (
    HOUR,
    MAX_NANOSECONDS,
    MILLISECOND,
    MINUTE,
    SECOND,
    DurationError,
    describe,
    format_go,
    parse,
)


@pytest.mark.parametrize(
    ("text", "nanoseconds"),
    [
        ("168h", 168 * HOUR),
        ("30m", 30 * MINUTE),
        ("1h30m", 90 * MINUTE),
        ("1.5h", 90 * MINUTE),
        ("90s", 90 * SECOND),
        ("300ms", 300 * MILLISECOND),
        ("2us", 2_000),
        ("2\u00b5s", 2_000),  # Go takes the micro sign
        ("7ns", 7),
        (".5s", SECOND // 2),
        ("0", 0),
        ("-5m", -5 * MINUTE),
        ("+5m", 5 * MINUTE),
        ("1h0m0s", HOUR),  # Go's own String() form
        ("2562047h47m16.854775807s", MAX_NANOSECONDS),
    ],
)
def test_go_durations_parse_to_nanoseconds(text: str, nanoseconds: int) -> None:
    assert parse(text) == nanoseconds


@pytest.mark.parametrize(
    "text",
    ["", "5", "h", "5x", "1h30", "7d", "5 m", ".s", "1e3s", "2562047h47m16.854775808s"],
)
def test_what_go_refuses_is_refused_with_the_forms_it_takes(text: str) -> None:
    with pytest.raises(DurationError) as refused:
        parse(text)
    assert repr(text) in str(refused.value) or "longer" in str(refused.value)


@pytest.mark.parametrize(
    ("nanoseconds", "text"),
    [
        (168 * HOUR, "168h"),
        (90 * MINUTE, "1h30m"),
        (5 * MINUTE, "5m"),
        (1500 * MILLISECOND, "1s500ms"),
        (0, "0s"),
        (-30 * SECOND, "-30s"),
    ],
)
def test_the_shortest_go_form_is_written(nanoseconds: int, text: str) -> None:
    assert format_go(nanoseconds) == text


@given(st.integers(min_value=-MAX_NANOSECONDS, max_value=MAX_NANOSECONDS))
def test_every_duration_round_trips_exactly(nanoseconds: int) -> None:
    assert parse(format_go(nanoseconds)) == nanoseconds


@pytest.mark.parametrize(
    ("nanoseconds", "words"),
    [
        (5 * MINUTE, "5 min"),
        (168 * HOUR, "7 d"),
        (90 * MINUTE, "1 h 30 min"),
        (250 * MILLISECOND, "250 ms"),
    ],
)
def test_pages_describe_durations_in_words(nanoseconds: int, words: str) -> None:
    assert describe(nanoseconds) == words
