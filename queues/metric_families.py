"""Metric families for ``/metrics``, on ``prometheus_client``: a gauge, a
counter and a histogram to which a collector adds samples by a dict of
labels, and a moment as a Prometheus timestamp. Every app's collector builds
its families with these; the library writes the exposition format."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric as Family
from prometheus_client.utils import floatToGoString

Labels = Mapping[str, str] | None


class Gauge(GaugeMetricFamily):
    def add(self, value: float, labels: Labels = None) -> None:
        self.add_sample(self.name, dict(labels or {}), value)


class Counter(CounterMetricFamily):
    def add(self, value: float, labels: Labels = None) -> None:
        # The library keeps a counter's name without _total; its samples carry it.
        self.add_sample(self.name + "_total", dict(labels or {}), value)


class Histogram(HistogramMetricFamily):
    def add(
        self,
        labels: Mapping[str, str],
        bounds: Sequence[float],
        counts: Sequence[int],
        total: float,
    ) -> None:
        """One label set: ``counts`` per bucket (not cumulative), one per bound,
        missing trailing ones zero; +Inf is added when ``bounds`` lacks it."""
        if len(counts) > len(bounds):
            raise ValueError(f"{self.name}: {len(counts)} bucket counts for {len(bounds)} bounds")
        running = 0
        for index, bound in enumerate(bounds):
            running += int(counts[index]) if index < len(counts) else 0
            self.add_sample(
                self.name + "_bucket", {**labels, "le": floatToGoString(bound)}, running
            )
        if not bounds or not math.isinf(bounds[-1]):
            self.add_sample(self.name + "_bucket", {**labels, "le": "+Inf"}, running)
        self.add_sample(self.name + "_count", dict(labels), running)
        self.add_sample(self.name + "_sum", dict(labels), total)


def gauge(name: str, documentation: str) -> Gauge:
    return Gauge(name, documentation)


def counter(name: str, documentation: str) -> Counter:
    return Counter(name, documentation)


def histogram(name: str, documentation: str) -> Histogram:
    return Histogram(name, documentation)


def timestamp(moment: datetime | None) -> float | None:
    return None if moment is None else moment.timestamp()


__all__ = ["Family", "counter", "gauge", "histogram", "timestamp"]
