from __future__ import annotations

import pytest

from queues.names import (
    dns_label_error,
    dns_subdomain_error,
    label_value_error,
    qualified_name_error,
)


@pytest.mark.parametrize("name", ["research", "a", "team-1", "x" * 63])
def test_valid_labels(name: str) -> None:
    assert dns_label_error(name) is None


@pytest.mark.parametrize(
    ("name", "complaint"),
    [
        ("", "must not be empty"),
        ("Research", "lowercase"),
        ("-a", "starting and ending"),
        ("a.b", "RFC 1123 label"),
        ("a_b", "RFC 1123 label"),
        ("x" * 64, "at most 63"),
    ],
)
def test_invalid_labels(name: str, complaint: str) -> None:
    problem = dns_label_error(name)
    assert problem is not None and complaint in problem


def test_subdomains_allow_dots_and_253_characters() -> None:
    assert dns_subdomain_error("h100.ondemand") is None
    assert dns_subdomain_error("a" * 253) is None
    assert "at most 253" in (dns_subdomain_error("a" * 254) or "")
    assert dns_subdomain_error("a..b") is not None


@pytest.mark.parametrize(
    "key", ["nvidia.com/gpu.product", "cloud.google.com/gke-spot", "zone", "Kind_Of.Thing"]
)
def test_qualified_names(key: str) -> None:
    assert qualified_name_error(key) is None


@pytest.mark.parametrize("key", ["", "/gpu", "Bad_Prefix/x", "a/b/c", "x/" + "y" * 64, "-x"])
def test_bad_qualified_names(key: str) -> None:
    assert qualified_name_error(key) is not None


def test_label_values() -> None:
    assert label_value_error("") is None
    assert label_value_error("NVIDIA-H100-80GB-HBM3") is None
    assert label_value_error("has space") is not None
    assert label_value_error("x" * 64) is not None
