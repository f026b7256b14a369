"""Berth's metric families on prometheus_client, without a database: label
values and help text escaped by the library, histogram buckets cumulative and
ending at +Inf, counters written with ``_total``. The page
is read back with the library's own parser (``metrics_support``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from queues.metric_families import Family, counter, gauge, histogram
from tests.cluster.metrics_support import ODD_REASON, one, parse, values


def written(*families: Family) -> str:
    class Fixed:
        def collect(self) -> Iterator[Family]:
            yield from families

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Fixed())
    return generate_latest(registry).decode()


def test_label_values_and_help_are_escaped() -> None:
    metric = gauge("berth_x", 'Line one\nback\\slash "quotes" stay')
    metric.add(1, {"reason": ODD_REASON})
    text = written(metric)
    assert text == (
        '# HELP berth_x Line one\\nback\\\\slash "quotes" stay\n'
        "# TYPE berth_x gauge\n"
        'berth_x{reason="Said \\"no\\" \\\\ then\\nleft"} 1.0\n'
    )
    assert parse(text)["berth_x"].samples == [("berth_x", {"reason": ODD_REASON}, 1.0)]


def test_histogram_buckets_are_cumulative_and_end_with_inf() -> None:
    metric = histogram("berth_h", "h")
    metric.add({"q": "a"}, (1, 5), [2, 3], 9.5)  # no +Inf bound: added
    families = parse(written(metric))
    assert families["berth_h"].type == "histogram"
    assert values(families, "berth_h_bucket") == {
        (("le", "1.0"), ("q", "a")): 2,
        (("le", "5.0"), ("q", "a")): 5,
        (("le", "+Inf"), ("q", "a")): 5,
    }
    assert one(families, "berth_h_sum", q="a") == 9.5
    assert one(families, "berth_h_count", q="a") == 5
    with pytest.raises(ValueError, match="bucket counts"):
        metric.add({}, (1,), [1, 2, 3], 0)


def test_counters_are_written_with_total() -> None:
    metric = counter("berth_evictions_total", "Evictions.")
    metric.add(3, {"reason": "Preempted"})
    text = written(metric)
    assert "# TYPE berth_evictions_total counter" in text
    assert 'berth_evictions_total{reason="Preempted"} 3.0' in text
    assert one(parse(text), "berth_evictions_total", reason="Preempted") == 3


def test_a_family_without_samples_still_says_what_it_is() -> None:
    text = written(gauge("berth_nothing_yet", "Nothing measured yet."))
    assert (
        text == "# HELP berth_nothing_yet Nothing measured yet.\n# TYPE berth_nothing_yet gauge\n"
    )
