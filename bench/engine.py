"""The admission engine on Kueue's own scheduler performance scenarios.

    .venv/bin/python bench/engine.py            # both scenarios
    .venv/bin/python bench/engine.py --only baseline

For each scenario (``scenarios/kueue-perf-baseline.yaml``: 5 cohorts × 6
ClusterQueues, 15,000 workloads; ``scenarios/kueue-perf-large.yaml``: 10 cohorts ×
100 ClusterQueues, 50,000 workloads, Kueue's large-scale configuration;
``scenarios/kueue-perf-baseline-poisson.yaml``: the baseline with Poisson
arrivals) it simulates the whole stream in a fresh
process and prints wall time, admissions per second, scheduling cycles and the
peak resident memory of that process. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = {
    "baseline": ROOT / "scenarios" / "kueue-perf-baseline.yaml",
    "large": ROOT / "scenarios" / "kueue-perf-large.yaml",
    "poisson": ROOT / "scenarios" / "kueue-perf-baseline-poisson.yaml",
}


def measure(path: Path) -> dict[str, object]:
    sys.path.insert(0, str(ROOT))
    from queues.engine.experiment import simulate
    from queues.engine.scenario import load

    started = time.perf_counter()
    scenario = load(path)
    loaded = time.perf_counter()
    _result, summary = simulate(scenario)
    finished = time.perf_counter()
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    wait = summary["time_to_admission"]
    return {
        "workloads": summary["workloads"],
        "admissions": summary["admissions"],
        "cycles": summary["cycles"],
        "load_s": loaded - started,
        "simulate_s": finished - loaded,
        "wall_s": finished - started,
        "admissions_per_s": summary["admissions"] / (finished - loaded),
        "peak_mib": peak_kib / 1024,
        "simulated_s": summary["simulated_seconds"],
        "wait_p50_s": wait["p50"],
        "wait_p95_s": wait["p95"],
        "preemptions": sum(summary["preemptions"].values()),
        "borrowed_share": _borrowed_share(summary),
    }


def _borrowed_share(summary: dict[str, object]) -> float:
    """Of the resource-seconds in use, the share borrowed from a cohort."""
    used = borrowed = 0.0
    queues = summary["cluster_queues"]
    assert isinstance(queues, dict)
    for queue in queues.values():
        for figures in queue["resource_seconds"].values():
            used += figures.get("used", 0.0)
            borrowed += figures.get("borrowed", 0.0)
    return borrowed / used if used else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(SCENARIOS))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(Path(args.child))))
        return 0
    names = [args.only] if args.only else list(SCENARIOS)
    print(
        f"{'scenario':<10} {'workloads':>9} {'wall s':>8} {'sim s':>8} {'adm/s':>8} "
        f"{'cycles':>7} {'peak MiB':>9} {'p50 wait':>9} {'p95 wait':>9} {'preempt':>8} "
        f"{'borrowed':>9}",
        flush=True,
    )
    for name in names:
        child = subprocess.run(
            [sys.executable, __file__, "--child", str(SCENARIOS[name])],
            capture_output=True,
            text=True,
            check=False,
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        if child.returncode != 0:
            print(f"{name}: failed\n{child.stderr}", file=sys.stderr)
            return 1
        f = json.loads(child.stdout.strip().splitlines()[-1])
        print(
            f"{name:<10} {f['workloads']:>9} {f['wall_s']:>8.1f} {f['simulate_s']:>8.1f} "
            f"{f['admissions_per_s']:>8.0f} {f['cycles']:>7} {f['peak_mib']:>9.0f} "
            f"{f['wait_p50_s']:>8.1f}s {f['wait_p95_s']:>8.1f}s {f['preemptions']:>8} "
            f"{100 * f['borrowed_share']:>8.1f}%",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
