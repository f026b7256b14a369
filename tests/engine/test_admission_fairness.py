"""Admission fair sharing's arithmetic, as Kueue's: alpha from the elapsed time
and the half-life, decay towards what a LocalQueue holds, the entry penalty
settled by the next sample, resource weights, cores not millicores."""

from __future__ import annotations

import pytest

from queues.engine.admission_fairness import UsageLedger, local_queue_of
from queues.engine.model import AdmissionFairSharing, PodSet, Workload


def holding(name: str, local_queue: str, cpu_milli: int, gpus: int, pods: int = 1) -> Workload:
    return Workload(
        name,
        "q",
        (PodSet("main", pods, {"cpu": cpu_milli, "nvidia.com/gpu": gpus}),),
        namespace="team",
        local_queue=local_queue,
    )


def test_alpha_is_one_minus_half_to_the_elapsed_half_lives() -> None:
    config = AdmissionFairSharing(half_life=60.0)
    assert config.alpha(0) == 0
    assert config.alpha(60) == pytest.approx(0.5)
    assert config.alpha(120) == pytest.approx(0.75)
    assert AdmissionFairSharing(half_life=0).alpha(60) == 0


def test_usage_decays_towards_what_is_held_and_penalties_settle() -> None:
    config = AdmissionFairSharing(half_life=60.0, sampling_interval=60.0)
    ledger = UsageLedger(config, now=0.0)
    work = holding("w", "main", cpu_milli=4000, gpus=2, pods=2)
    ledger.admitted(work)  # entry penalty: requests times the sampling alpha (0.5)
    key = local_queue_of(work)
    assert key == "team/main"
    assert ledger.usage(key) == pytest.approx(0.5 * (8 + 4))  # 8 cores + 4 GPUs
    ledger.sample(60.0, [work])
    assert ledger.usage(key) == pytest.approx(0.5 * 12)  # half way to 12; penalty gone
    ledger.sample(120.0, [])
    assert ledger.usage(key) == pytest.approx(0.25 * 12)  # decays when nothing is held
    assert ledger.usage("team/other") == 0


def test_resource_weights_scale_each_resource() -> None:
    config = AdmissionFairSharing(
        half_life=60.0, sampling_interval=60.0, resource_weights={"nvidia.com/gpu": 10.0}
    )
    ledger = UsageLedger(config, now=0.0)
    ledger.sample(60.0, [holding("w", "main", cpu_milli=1000, gpus=1)])
    assert ledger.usage("team/main") == pytest.approx(0.5 * (1 + 10))
