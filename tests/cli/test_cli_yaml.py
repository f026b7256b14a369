"""The CLI writes YAML with the standard library: whatever it writes, a YAML
reader (PyYAML here) reads back as the same data (no database)."""

from __future__ import annotations

import math
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from berth_cli.yaml_text import dump, dump_all, scalar

KEYS = st.text(min_size=1, max_size=12)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=30)
    | st.sampled_from(["yes", "No", "off", "null", "~", "2026-12-01", "1e3", "0x1F", "- a", "#"])
)
DATA = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(DATA)
def test_any_answer_reads_back_as_itself(data: Any) -> None:
    assert yaml.safe_load(dump(data)) == data


@settings(max_examples=100, deadline=None)
@given(st.lists(st.dictionaries(KEYS, DATA, min_size=1, max_size=4), min_size=1, max_size=3))
def test_manifests_read_back_document_by_document(documents: list[dict[str, Any]]) -> None:
    assert list(yaml.safe_load_all(dump_all(documents))) == documents


def test_plain_where_nothing_could_misread_it_quoted_elsewhere() -> None:
    assert scalar("research") == "research"
    assert scalar("nvidia.com/gpu") == "nvidia.com/gpu"
    # YAML 1.1 reads these as booleans, nulls, numbers or dates unless quoted.
    for text in ("yes", "Off", "null", "12", "2026-12-01", "1e3", ""):
        assert scalar(text) == f'"{text}"'
    assert scalar(1e20) == "1.0e+20" and yaml.safe_load(scalar(1e20)) == 1e20
    assert scalar(math.inf) == ".inf"


def test_a_manifest_reads_as_kubectl_would() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "labels": {"kueue.x-k8s.io/queue-name": "research"}},
        "spec": {
            "parallelism": 2,
            "suspend": True,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "command": ["torchrun", "--nnodes=2", "train.py"],
                            "env": [{"name": "WORLD_SIZE", "value": "2"}],
                            "resources": {"limits": {"nvidia.com/gpu": "8"}},
                        }
                    ],
                    "tolerations": [],
                }
            },
        },
    }
    text = dump(job)
    assert yaml.safe_load(text) == job
    assert text.startswith("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: train\n")
