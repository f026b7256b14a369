"""A change's figure for ``bench/replay_scale.py``: a baseline commit and the
working tree replayed side by side, each run pinned to a core, in turns.

    .venv/bin/python bench/side_by_side.py HEAD~1
    .venv/bin/python bench/side_by_side.py 24dcbd6 --runs 6 -- --workloads 300000 --teams 60
    .venv/bin/python bench/side_by_side.py HEAD --pure --runs 1 -- --workloads 2000 --teams 4

Why this way: this VM's speed moves by half from hour to hour and its two
cores do not run alike (the same commit, run on both at once, replayed in
46.0 s on one and 43.3 s on the other), so figures taken at different
times, or a pair run once, mislead. The baseline is checked out in a
worktree of its own (``git worktree``) with its engine compiled there
(``scripts/build_engine.py``; ``--pure`` runs both as pure Python and
builds nothing). Then each core replays the two in turns, one starting
with the baseline and the other with the working tree, ``--runs`` times
each: every run has a partner on the same core just before or after it,
and the ratio of each such pair is printed, with their median.

Every run must give the same answers: its output, the timing, memory and
progress lines left out, is compared with the baseline's first run
(admissions, cycles of each kind, nominations and answers reused,
preemptions and the waits table); where they differ, the lines are shown.
A change that means to move counts (the nominations, say) shows which.
Both sides must run the engine alike, compiled or pure (each side's
``engine:`` line is printed). ``--so-far``, ``--workers``, ``--profile``
and ``--tracemalloc`` print timings of their own and are refused. Prints
figures; asserts nothing. The worktree is removed at the end, however the
run ends (``--keep`` leaves it).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path("bench") / "replay_scale.py"

# Lines of replay_scale.py's output that move from run to run, or with the
# engine's speed: left out when two runs' answers are compared.
_MOVING = re.compile(r"^(workloads |engine:|generat|memory|cycle times|  replay)|RSS")
# replay_scale.py's options that print timings of their own.
_REFUSED = ("--so-far", "--workers", "--profile", "--tracemalloc")
_RATE = re.compile(r"\([0-9,.]+/s\)")
_REPLAY = re.compile(r"^workloads .*replay ([0-9.]+) s", re.MULTILINE)


def answers(output: str) -> list[str]:
    """The run's output without what moves with time: what must not change."""
    return [_RATE.sub("", line) for line in output.splitlines() if not _MOVING.search(line)]


def verdict(outputs: list[tuple[str, str]]) -> list[str]:
    """Whether every run (side, output) gave the baseline's first run's
    answers; where some did not, how the first of them differs."""
    expected = answers(next(output for side, output in outputs if side == "baseline"))
    differing = [(side, said) for side, said in ((s, answers(o)) for s, o in outputs)]
    differing = [(side, said) for side, said in differing if said != expected]
    if not differing:
        return [
            f"answers: the same in all {len(outputs)} runs (admissions, cycles, nominations, "
            "preemptions, waits)"
        ]
    side, said = differing[0]
    shown = list(difflib.unified_diff(expected, said, "baseline", side, lineterm=""))
    return [
        f"answers: DIFFER in {len(differing)} of {len(outputs)} runs; the first, {side}:",
        *(f"  {line}" for line in shown[:40]),
    ]


def replay_seconds(output: str) -> float:
    found = _REPLAY.search(output)
    if found is None:
        raise SystemExit(f"no replay time in the output:\n{output[-2000:]}")
    return float(found.group(1))


def engine_line(output: str) -> str:
    """What the run said of its engine: compiled, or pure Python."""
    return next((line for line in output.splitlines() if line.startswith("engine:")), "")


class RunFailed(Exception):
    pass


def checkout(commit: str, where: Path) -> None:
    """The commit in a worktree of its own at ``where``."""
    added = subprocess.run(
        ["git", "worktree", "add", "--detach", "--force", str(where), commit],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if added.returncode != 0:
        raise RunFailed(f"git worktree add {where} {commit}:\n{added.stderr}")


def compile_engine(where: Path) -> None:
    print(f"==> compiling the baseline's engine in {where} (a minute or two)", flush=True)
    started = time.monotonic()
    built = subprocess.run([sys.executable, "scripts/build_engine.py", "--require"], cwd=where)
    if built.returncode != 0:
        raise RunFailed("the baseline's engine did not compile (above): try --pure")
    print(f"==> built in {time.monotonic() - started:.0f} s", flush=True)


def run_once(tree: Path, core: int | None, bench_args: list[str], pure: bool) -> str:
    env = dict(os.environ, PYTHONPATH=str(tree))
    if pure:
        env["BERTH_PURE_ENGINE"] = "1"
    # Pinned once started: a pre-exec hook is not safe with two threads starting runs.
    with subprocess.Popen(
        [sys.executable, str(BENCH), *bench_args],
        cwd=tree,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        if core is not None:
            os.sched_setaffinity(process.pid, {core})
        stdout, stderr = process.communicate()
    if process.returncode != 0:
        raise RunFailed(f"replay_scale.py failed in {tree}:\n{stderr[-2000:]}")
    return stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("baseline", help="the commit to compare the working tree with")
    parser.add_argument("--runs", type=int, default=3, help="runs of each side per core")
    parser.add_argument("--pure", action="store_true", help="both sides as pure Python")
    parser.add_argument("--keep", action="store_true", help="leave the baseline's worktree")
    parser.epilog = "replay_scale.py's own arguments go after --"
    argv = sys.argv[1:]
    bench_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, bench_args = argv[:cut], argv[cut + 1 :]
    args = parser.parse_args(argv)
    args.bench_args = bench_args
    if args.runs < 1:
        parser.error("--runs: at least 1")
    for refused in _REFUSED:
        if any(arg.split("=")[0] == refused for arg in bench_args):
            parser.error(f"{refused}: prints timings of its own, which differ from run to run")
    sha = subprocess.run(
        ["git", "rev-parse", "--verify", f"{args.baseline}^{{commit}}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if sha.returncode != 0:
        parser.error(f"baseline: {args.baseline!r} is not a commit here")
    base = Path(tempfile.mkdtemp(prefix="berth-baseline-"))
    try:
        checkout(sha.stdout.strip(), base)
        if not args.pure:
            compile_engine(base)
        return compare(base, args)
    except RunFailed as failed:
        print(f"error: {failed}", file=sys.stderr)
        return 1
    finally:
        if not args.keep:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(base)],
                cwd=ROOT,
                capture_output=True,
                check=False,
            )
            shutil.rmtree(base, ignore_errors=True)


def compare(base: Path, args: argparse.Namespace) -> int:
    sides = {"baseline": base, "working tree": ROOT}
    cores: list[int | None] = []
    cores.extend(sorted(os.sched_getaffinity(0))[:2])
    if len(cores) < 2:
        cores = [None]  # one core: the turns run one after another
    times: dict[tuple[str, int, int], float] = {}
    outputs: list[tuple[str, str]] = []
    failures: list[str] = []
    lock = threading.Lock()

    def turns(slot: int, core: int | None) -> None:
        for run in range(args.runs):
            # Each core starts with the other side; one core alone alternates.
            first = "baseline" if (slot + run * (len(cores) == 1)) % 2 == 0 else "working tree"
            for side in (first, "working tree" if first == "baseline" else "baseline"):
                if failures:
                    return  # the other core's run failed: stop here too
                try:
                    output = run_once(sides[side], core, args.bench_args, args.pure)
                    seconds = replay_seconds(output)
                except RunFailed as failed:
                    with lock:
                        failures.append(str(failed))
                    return
                with lock:
                    times[(side, slot, run)] = seconds
                    outputs.append((side, output))
                    print(
                        f"  core {core if core is not None else '-'}  run {run + 1}  "
                        f"{side:<12}  replay {seconds:.1f} s",
                        flush=True,
                    )

    print(
        f"==> {args.runs} run(s) of each side per core: {' '.join(args.bench_args) or 'defaults'}"
    )
    threads = [threading.Thread(target=turns, args=(slot, core)) for slot, core in enumerate(cores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RunFailed(failures[0])
    engines = {side: engine_line(output) for side, output in reversed(outputs)}
    for side in sides:
        print(f"{side:<12}  {engines[side] or 'engine: not said'}")
    if len({engine.split(" (")[0] for engine in engines.values()}) != 1:
        raise RunFailed("the two sides ran the engine differently: their figures do not compare")
    ratios = [
        times[("working tree", slot, run)] / times[("baseline", slot, run)]
        for slot in range(len(cores))
        for run in range(args.runs)
    ]
    for side in sides:
        spread = sorted(v for k, v in times.items() if k[0] == side)
        each = ", ".join(f"{v:.1f}" for v in spread)
        print(f"{side:<12}  replay median {statistics.median(spread):.1f} s  ({each})")
    print(
        f"working tree / baseline, each run against its partner on the same core: median "
        f"{statistics.median(ratios):.3f} ({', '.join(f'{r:.3f}' for r in sorted(ratios))})"
    )
    for line in verdict(outputs):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
