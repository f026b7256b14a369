"""The Prometheus text exposition format (version 0.0.4), written by hand and
pure: metric families (``Metric``), histograms, escaping, and ``render``. The
reads that fill them are in ``cluster.metrics``."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

MetricType = Literal["gauge", "counter", "histogram"]
Labels = tuple[tuple[str, str], ...]

_NAME_START = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_NAME_REST = _NAME_START | set("0123456789")
# Sample suffixes in the order a family lists them for one label set.
_SUFFIX_ORDER = {"": 0, "_bucket": 0, "_sum": 1, "_count": 2}


def valid_name(name: str) -> bool:
    """A metric or label name: [a-zA-Z_][a-zA-Z0-9_]* (no colons: those are
    for recording rules)."""
    return bool(name) and name[0] in _NAME_START and all(c in _NAME_REST for c in name)


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """Integers without a decimal point; floats as Python's shortest repr
    (which Go's ParseFloat reads); infinities and NaN as the format spells them."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def format_bound(bound: float) -> str:
    """A histogram ``le``: Prometheus' canonical float form ("10.0", "+Inf"),
    the form Prometheus 3 normalises classic-histogram bounds to."""
    return "+Inf" if math.isinf(bound) else repr(float(bound))


@dataclass(frozen=True)
class Sample:
    labels: Labels
    value: float
    suffix: str = ""  # "_bucket", "_sum" or "_count" for histograms


@dataclass
class Metric:
    """One metric family: its name, type, help text and samples."""

    name: str
    type: MetricType
    help: str
    samples: list[Sample] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not valid_name(self.name):
            raise ValueError(f"invalid metric name {self.name!r}")

    def add(self, value: float, labels: Mapping[str, str] | None = None, suffix: str = "") -> None:
        pairs = tuple(sorted((labels or {}).items()))
        for name, _ in pairs:
            if not valid_name(name) or name.startswith("__"):
                raise ValueError(f"invalid label name {name!r} in {self.name}")
        if suffix not in _SUFFIX_ORDER:
            raise ValueError(f"invalid sample suffix {suffix!r} in {self.name}")
        self.samples.append(Sample(pairs, value, suffix))


def histogram_samples(
    metric: Metric,
    labels: Mapping[str, str],
    bounds: Sequence[float],
    counts: Sequence[int],
    total: float,
) -> None:
    """Add one label set's histogram to ``metric``: cumulative ``_bucket`` per
    bound (ending with +Inf, added if ``bounds`` lacks it), ``_sum`` and
    ``_count`` (equal to the +Inf bucket). ``counts`` are per bucket, not
    cumulative, one per bound; missing trailing counts are zero."""
    if len(counts) > len(bounds):
        raise ValueError(f"{metric.name}: {len(counts)} bucket counts for {len(bounds)} bounds")
    running = 0
    for index, bound in enumerate(bounds):
        running += int(counts[index]) if index < len(counts) else 0
        metric.add(running, {**labels, "le": format_bound(bound)}, "_bucket")
    if not bounds or not math.isinf(bounds[-1]):
        metric.add(running, {**labels, "le": "+Inf"}, "_bucket")
    metric.add(total, labels, "_sum")
    metric.add(running, labels, "_count")


def _le(sample: Sample) -> float:
    value = dict(sample.labels).get("le")
    return math.inf if value in (None, "+Inf") else float(value)


def _sort_key(sample: Sample) -> tuple[Labels, int, float, Labels, float]:
    """Label set (without ``le``), then buckets by bound, then _sum, _count;
    the full labels and the value break any remaining tie."""
    without_le = tuple(pair for pair in sample.labels if pair[0] != "le")
    bound = _le(sample) if sample.suffix else 0.0
    return without_le, _SUFFIX_ORDER[sample.suffix], bound, sample.labels, sample.value


def _format_labels(labels: Labels) -> str:
    if not labels:
        return ""
    body = ",".join(f'{name}="{escape_label_value(value)}"' for name, value in labels)
    return "{" + body + "}"


def render(metrics: Iterable[Metric]) -> str:
    """The text exposition of ``metrics``: families by name, samples by label
    set, each family with its HELP and TYPE lines, even when it has no samples."""
    lines: list[str] = []
    seen: set[str] = set()
    for metric in sorted(metrics, key=lambda m: m.name):
        if metric.name in seen:
            raise ValueError(f"metric family {metric.name} given twice")
        seen.add(metric.name)
        lines.append(f"# HELP {metric.name} {escape_help(metric.help)}")
        lines.append(f"# TYPE {metric.name} {metric.type}")
        for sample in sorted(metric.samples, key=_sort_key):
            name = metric.name + sample.suffix
            lines.append(f"{name}{_format_labels(sample.labels)} {format_value(sample.value)}")
    return "\n".join(lines) + "\n" if lines else ""
