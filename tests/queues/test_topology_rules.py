"""The Topology CRD's rules on levels as a pure function (no database): what the
API's serializer already stops (a non-list, a non-string) still gets a named
rule here, and every error of one list is reported at once."""

from __future__ import annotations

from typing import Any

import pytest

from queues.topology_rules import HOSTNAME, MAX_LEVELS, level_errors

RACK = "topology.berth.dev/rack"


def broken(levels: Any) -> list[tuple[str, str]]:
    return [(e.field, e.rule) for e in level_errors("levels", levels)]


@pytest.mark.parametrize(
    "levels",
    [
        [HOSTNAME],
        [RACK],
        ["topology.berth.dev/block", RACK, HOSTNAME],
        [f"l{i}" for i in range(MAX_LEVELS)],
    ],
)
def test_valid_levels_break_nothing(levels: list[str]) -> None:
    assert broken(levels) == []


@pytest.mark.parametrize(
    ("levels", "expected"),
    [
        ("topology.berth.dev/rack", [("levels", "type")]),
        ({"nodeLabel": RACK}, [("levels", "type")]),
        ([RACK, 7], [("levels[1]", "type")]),
        ([None], [("levels[0]", "type")]),
    ],
)
def test_shapes_the_serializer_would_stop_are_named_too(levels: Any, expected: Any) -> None:
    assert broken(levels) == expected


def test_every_broken_rule_of_one_list_is_reported() -> None:
    levels = [HOSTNAME, "bad key!", RACK, RACK] + [f"l{i}" for i in range(MAX_LEVELS)]
    assert broken(levels) == [
        ("levels", "max-levels"),
        ("levels[0]", "hostname-last"),
        ("levels[1]", "label-key"),
        ("levels[3]", "duplicate-level"),
    ]


def test_a_repeated_hostname_is_a_duplicate_and_not_last() -> None:
    assert broken([HOSTNAME, HOSTNAME]) == [
        ("levels[0]", "hostname-last"),
        ("levels[1]", "duplicate-level"),
    ]
