"""Label selectors as the API server evaluates them (a ClusterQueue's
namespaceSelector on the simulated cluster)."""

from __future__ import annotations

import pytest

from queues.simulation.selectors import selects

TEAM = {"berth.dev/team": "research", "env": "prod"}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        (None, False),  # Kueue's default: no namespace
        ({}, True),  # every namespace
        ({"matchLabels": {"berth.dev/team": "research"}}, True),
        ({"matchLabels": {"berth.dev/team": "serving"}}, False),
        ({"matchExpressions": [{"key": "berth.dev/team", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}, False),
        ({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}, True),
        ({"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]}, True),
        ({"matchExpressions": [{"key": "env", "operator": "In", "values": ["dev"]}]}, False),
        ({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]}, False),
        ({"matchExpressions": [{"key": "x", "operator": "NotIn", "values": ["prod"]}]}, True),
        ({"matchExpressions": [{"key": "env", "operator": "Gt", "values": ["1"]}]}, False),
        (
            {
                "matchLabels": {"env": "prod"},
                "matchExpressions": [{"key": "berth.dev/team", "operator": "In", "values": ["x"]}],
            },
            False,
        ),
    ],
)
def test_selects(selector: dict[str, object] | None, expected: bool) -> None:
    assert selects(selector, TEAM) is expected
