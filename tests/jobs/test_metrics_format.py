"""The Prometheus text format as cluster.metrics writes it, without a database:
label values and help text escaped, values spelt the format's way, histogram
buckets cumulative and ending at +Inf, metric and label names checked, and
output sorted whatever order the metrics and samples come in. The parser the
checks read it with is in ``metrics_support``."""

from __future__ import annotations

import math
import random

import pytest

from cluster.exposition import (
    Metric,
    escape_label_value,
    format_value,
    histogram_samples,
    render,
)
from cluster.models import WAIT_BUCKETS
from tests.jobs.metrics_support import ODD_REASON, one, parse, values


def test_label_values_and_help_are_escaped() -> None:
    assert escape_label_value('a\\b"c\nd') == 'a\\\\b\\"c\\nd'
    metric = Metric("berth_x", "gauge", 'Line one\nback\\slash "quotes" stay')
    metric.add(1, {"reason": ODD_REASON})
    text = render([metric])
    assert text == (
        '# HELP berth_x Line one\\nback\\\\slash "quotes" stay\n'
        "# TYPE berth_x gauge\n"
        'berth_x{reason="Said \\"no\\" \\\\ then\\nleft"} 1\n'
    )
    assert parse(text)["berth_x"].samples == [("berth_x", {"reason": ODD_REASON}, 1.0)]


def test_values_use_the_formats_spelling() -> None:
    assert [format_value(v) for v in (3, 2.0, 0.25, math.inf, -math.inf)] == [
        "3",
        "2",
        "0.25",
        "+Inf",
        "-Inf",
    ]
    assert format_value(math.nan) == "NaN"
    assert format_value(1764583230.5) == "1764583230.5"


def test_histogram_buckets_are_cumulative_and_end_with_inf() -> None:
    metric = Metric("berth_h", "histogram", "h")
    histogram_samples(metric, {"q": "a"}, (1, 5), [2, 3], 9.5)  # no +Inf bound: added
    families = parse(render([metric]))
    assert values(families, "berth_h_bucket") == {
        (("le", "1.0"), ("q", "a")): 2,
        (("le", "5.0"), ("q", "a")): 5,
        (("le", "+Inf"), ("q", "a")): 5,
    }
    assert one(families, "berth_h_sum", q="a") == 9.5
    assert one(families, "berth_h_count", q="a") == 5
    with pytest.raises(ValueError, match="bucket counts"):
        histogram_samples(metric, {}, (1,), [1, 2, 3], 0)


def test_names_are_checked() -> None:
    with pytest.raises(ValueError, match="metric name"):
        Metric("berth-x", "gauge", "x")
    with pytest.raises(ValueError, match="label name"):
        Metric("berth_x", "gauge", "x").add(1, {"bad-label": "v"})


def test_render_sorts_whatever_order_it_is_given() -> None:
    def build(seed: int) -> list[Metric]:
        rng = random.Random(seed)
        gauge, hist = Metric("berth_b", "gauge", "b"), Metric("berth_a", "histogram", "a")
        queues = ["q2", "q10", "q1"]
        rng.shuffle(queues)
        for queue in queues:
            gauge.add(len(queue), {"cluster_queue": queue, "flavor": "f"})
            histogram_samples(hist, {"cluster_queue": queue}, WAIT_BUCKETS, [1] * 13, 1.0)
        rng.shuffle(gauge.samples)
        rng.shuffle(hist.samples)
        metrics = [gauge, hist]
        rng.shuffle(metrics)
        return metrics

    first = render(build(1))
    assert all(render(build(seed)) == first for seed in range(2, 8))
    lines = first.splitlines()
    assert lines[0] == "# HELP berth_a a"
    # Buckets by bound (numerically: 10 before 259200 before +Inf), then _sum, _count.
    q1 = [line for line in lines if 'cluster_queue="q1"' in line]
    assert q1[0].startswith('berth_a_bucket{cluster_queue="q1",le="10.0"}')
    assert q1[12].startswith('berth_a_bucket{cluster_queue="q1",le="+Inf"}')
    assert q1[13].startswith("berth_a_sum") and q1[14].startswith("berth_a_count")
