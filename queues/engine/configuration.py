"""The parts of Kueue's manager Configuration the engine honours, read from a
scenario's top level (or from the ``controller_manager_config.yaml`` of the
``kueue-manager-config`` ConfigMap Berth renders): ``fairSharing`` and
``waitForPodsReady``, with Kueue's field names and defaults.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from queues.engine.model import AdmissionFairSharing, WaitForPodsReady
from queues.engine.reading import Reader, read_seconds

# Kueue's allowed fairSharing.preemptionStrategies, the first being the default.
DEFAULT_STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
ALLOWED_STRATEGIES = (
    DEFAULT_STRATEGIES,
    ("LessThanOrEqualToFinalShare",),
    ("LessThanInitialShare",),
)
CONFIGURATION_KEYS = ("fairSharing", "waitForPodsReady", "admissionFairSharing")
ADMISSION_FAIR_FIELDS = ("usageHalfLifeTime", "usageSamplingInterval", "resourceWeights")
WAIT_FIELDS = ("enable", "timeout", "blockAdmission", "requeuingStrategy", "recoveryTimeout")
REQUEUING_FIELDS = ("timestamp", "backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds")


@dataclass(frozen=True)
class Configuration:
    fair_sharing: bool = False
    fair_sharing_strategies: tuple[str, ...] = DEFAULT_STRATEGIES
    wait_for_pods_ready: WaitForPodsReady | None = None
    admission_fair_sharing: AdmissionFairSharing | None = None


def manager_configuration(text: str) -> dict[str, Any]:
    """The keys the engine reads from the ``controller_manager_config.yaml`` of
    Kueue's manager ConfigMap; every other Kueue setting is left alone."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}
    if not isinstance(document, Mapping):
        return {}
    return {key: document[key] for key in CONFIGURATION_KEYS if key in document}


def read_configuration(reader: Reader, top: Mapping[str, Any]) -> Configuration:
    fair = reader.mapping("fairSharing", top.get("fairSharing"), ("enable", "preemptionStrategies"))
    enable = _flag(reader, "fairSharing.enable", fair.get("enable"))
    strategies = tuple(fair.get("preemptionStrategies") or DEFAULT_STRATEGIES)
    if strategies not in ALLOWED_STRATEGIES:
        reader.error(
            "fairSharing.preemptionStrategies",
            "unsupported-value",
            "use one of: " + "; ".join(", ".join(s) for s in ALLOWED_STRATEGIES),
        )
        strategies = DEFAULT_STRATEGIES
    return Configuration(
        fair_sharing=enable,
        fair_sharing_strategies=strategies,
        wait_for_pods_ready=read_wait_for_pods_ready(reader, top.get("waitForPodsReady")),
        admission_fair_sharing=read_admission_fair_sharing(reader, top.get("admissionFairSharing")),
    )


def read_admission_fair_sharing(reader: Reader, raw: Any) -> AdmissionFairSharing | None:
    if raw is None:
        return None
    block = reader.mapping("admissionFairSharing", raw, ADMISSION_FAIR_FIELDS)
    half_life = _positive_seconds(reader, "admissionFairSharing.usageHalfLifeTime", block)
    sampling = _positive_seconds(reader, "admissionFairSharing.usageSamplingInterval", block)
    weights: dict[str, float] = {}
    raw_weights = block.get("resourceWeights")
    if raw_weights is not None and not isinstance(raw_weights, Mapping):
        reader.error(
            "admissionFairSharing.resourceWeights", "type", "must map resources to weights"
        )
    for resource, weight in (raw_weights or {}).items() if isinstance(raw_weights, Mapping) else ():
        value = reader.number(f"admissionFairSharing.resourceWeights.{resource}", weight)
        if value is not None:
            weights[str(resource)] = value
    if half_life is None:
        return None
    return AdmissionFairSharing(
        half_life,
        sampling if sampling is not None else AdmissionFairSharing(1.0).sampling_interval,
        weights,
    )


def _positive_seconds(reader: Reader, path: str, block: Mapping[str, Any]) -> float | None:
    value = read_seconds(reader, path, block.get(path.rsplit(".", 1)[1]))
    if value is not None and value <= 0:
        reader.error(path, "positive", "must be more than 0")
        return None
    return value


def read_wait_for_pods_ready(reader: Reader, raw: Any) -> WaitForPodsReady | None:
    block = reader.mapping("waitForPodsReady", raw, WAIT_FIELDS)
    if not _flag(reader, "waitForPodsReady.enable", block.get("enable")):
        return None
    default = WaitForPodsReady()
    timeout = _positive_seconds(reader, "waitForPodsReady.timeout", block)
    path = "waitForPodsReady.requeuingStrategy"
    strategy = reader.mapping(path, block.get("requeuingStrategy"), REQUEUING_FIELDS)
    timestamp = strategy.get("timestamp", default.timestamp)
    if timestamp not in ("Eviction", "Creation"):
        reader.error(
            f"{path}.timestamp", "unsupported-value", f"{timestamp!r}: use Eviction or Creation"
        )
        timestamp = default.timestamp
    limit = reader.integer(f"{path}.backoffLimitCount", strategy.get("backoffLimitCount"))
    if limit is not None and limit < 0:
        reader.error(f"{path}.backoffLimitCount", "non-negative", "must be 0 or more")
        limit = None
    base = reader.integer(f"{path}.backoffBaseSeconds", strategy.get("backoffBaseSeconds"))
    if base is not None and base < 0:
        reader.error(f"{path}.backoffBaseSeconds", "non-negative", "must be 0 or more")
        base = None
    cap = reader.integer(f"{path}.backoffMaxSeconds", strategy.get("backoffMaxSeconds"))
    if cap is not None and cap < 1:
        reader.error(f"{path}.backoffMaxSeconds", "positive", "must be at least 1")
        cap = None
    read_seconds(reader, "waitForPodsReady.recoveryTimeout", block.get("recoveryTimeout"))
    return WaitForPodsReady(
        timeout=timeout if timeout else default.timeout,
        block_admission=_flag(
            reader, "waitForPodsReady.blockAdmission", block.get("blockAdmission")
        ),
        timestamp=timestamp,
        backoff_limit=limit,
        backoff_base=float(base) if base is not None else default.backoff_base,
        backoff_max=float(cap) if cap is not None else default.backoff_max,
    )


def _flag(reader: Reader, path: str, value: Any) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        reader.error(path, "type", "must be true or false")
        return False
    return value
