"""``berth gang-fit`` and ``GET /api/v1/gang-fit/`` against a real Berth over
HTTP (pytest-django's live server), called in-process: the map of the
topology-aware flavor as a table, the API's JSON, the nodes, and an unknown
flavor named with its rule (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from accounts.services import create_token
from tests.cli.test_cli import Berth
from tests.jobs.conftest import Org
from tests.jobs.test_explain_gang_fit import scatter


@pytest.fixture
def berth(
    transactional_db: Any,
    org: Org,
    live_server: Any,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Berth:
    scatter(org)
    monkeypatch.setenv("BERTH_CONFIG", str(tmp_path / "config.json"))
    monkeypatch.setenv("BERTH_URL", live_server.url)
    monkeypatch.setenv("BERTH_TOKEN", create_token(user=org.users["bob"], name="cli").secret)
    return Berth(capsys)


def test_the_map_as_a_table(berth: Berth) -> None:
    code, out, err = berth("gang-fit")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == (
        "h100 (topology gpu-racks): 32 of 48 GPUs free on 6 nodes; 2 nodes with every GPU "
        "free; 16 free GPUs on nodes partly in use (50 %)"
    )
    header = lines[3].split()
    assert header == ["GPUS/NODE", "ANYWHERE", "BLOCK", "RACK", "NODE"]
    eight = lines[7].split()
    assert eight == ["8", "2", "×", "8", "2", "×", "8", "2", "×", "8", "1", "×", "8"]
    assert lines[-1] == "Nodes by free GPUs: 2 nodes with 8, 4 nodes with 4"


def test_nodes_and_json(berth: Berth) -> None:
    code, out, _ = berth("gang-fit", "--flavor", "h100", "--nodes")
    assert code == 0
    assert out.splitlines()[-1].split() == ["sim-h100-005", "h100-b0", "h100-r1", "8", "of", "8"]
    code, out, _ = berth("gang-fit", "-o", "json")
    assert code == 0
    [found] = json.loads(out)["flavors"]
    assert (found["flavor"], found["free_gpus"], found["fragmentation"]) == ("h100", 32, 0.5)


def test_a_flavor_without_a_topology_is_named_with_the_rule(berth: Berth) -> None:
    code, _, err = berth("gang-fit", "--flavor", "h100-spot")
    assert code == 2
    assert err.strip() == (
        "berth: flavor: 'h100-spot' is not a flavor that names a topology; the flavors with "
        "a gang-fit map are h100 (topology-aware-flavor)"
    )
