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
A change that means to move counts (the nominations, say) shows which,
and the exit status is then 1. Both sides must run the engine alike: each
is asked before the runs, and a working tree whose engine changed since
``make install`` compiled it (it would run as pure Python) is refused
unless ``--pure``. ``--so-far``, ``--workers``, ``--profile`` and
``--tracemalloc`` print timings of their own and are refused. The
worktree is removed, and any run still going stopped, when the tool ends,
fails, or is interrupted (Ctrl-C, SIGTERM); ``--keep`` leaves the worktree.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import signal
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
# (The line naming the trees a replay goes through one after another is
# printed only since 7cdaa1e: a baseline before it replays them at once.)
_MOVING = re.compile(
    r"^(workloads |engine:|generat|memory|cycle times|  replay|  \d+ independent cohort)|RSS"
)
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
        raise RunFailed(f"no replay time in replay_scale.py's output:\n{output[-2000:]}")
    return float(found.group(1))


class RunFailed(Exception):
    pass


def _environment(tree: Path, pure: bool) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    if pure:
        env["BERTH_PURE_ENGINE"] = "1"
    return env


def engine_of(tree: Path, pure: bool) -> tuple[bool, str]:
    """Whether the tree's engine runs compiled, and why (``queues.engine.ENGINE``)."""
    asked = subprocess.run(
        [sys.executable, "-c", "import queues.engine as e; print(e.ENGINE.compiled, e.ENGINE.why)"],
        cwd=tree,
        env=_environment(tree, pure),
        capture_output=True,
        text=True,
        check=False,
    )
    if asked.returncode != 0:
        raise RunFailed(f"asking {tree}'s engine:\n{asked.stderr[-2000:]}")
    compiled, _, why = asked.stdout.strip().partition(" ")
    return compiled == "True", why


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


class Runs:
    """The replays under way, so that a failure, or the tool's end, stops
    the others rather than leaving them running pinned to their cores."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.live: set[subprocess.Popen[str]] = set()
        self.failures: list[str] = []
        self.stopping = False

    def once(self, tree: Path, core: int | None, bench_args: list[str], pure: bool) -> str:
        with self.lock:
            if self.stopping:
                raise RunFailed("stopped")
            process = subprocess.Popen(
                [sys.executable, str(BENCH), *bench_args],
                cwd=tree,
                env=_environment(tree, pure),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            self.live.add(process)
        try:
            # Pinned once started: a pre-exec hook is not safe with two threads starting runs.
            if core is not None:
                os.sched_setaffinity(process.pid, {core})
            stdout, stderr = process.communicate()
        finally:
            with self.lock:
                self.live.discard(process)
        if process.returncode != 0:
            raise RunFailed(f"replay_scale.py failed in {tree}:\n{stderr[-2000:]}")
        return stdout

    def fail(self, why: str) -> None:
        with self.lock:
            if not self.stopping:
                self.failures.append(why)
        self.stop()

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            for process in self.live:
                process.terminate()


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM: the worktree is removed as for Ctrl-C


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="replay_scale.py's own arguments go after --"
    )
    parser.add_argument("baseline", help="the commit to compare the working tree with")
    parser.add_argument("--runs", type=int, default=3, help="runs of each side per core")
    parser.add_argument("--pure", action="store_true", help="both sides as pure Python")
    parser.add_argument("--keep", action="store_true", help="leave the baseline's worktree")
    argv = sys.argv[1:]
    bench_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, bench_args = argv[:cut], argv[cut + 1 :]
    args = parser.parse_args(argv)
    args.bench_args = bench_args
    if args.runs < 1:
        parser.error("--runs: at least 1")
    for arg in bench_args:
        name = arg.split("=")[0]
        # argparse takes any unambiguous prefix of an option.
        refused = [r for r in _REFUSED if len(name) > 2 and r.startswith(name)]
        if arg.startswith("--") and refused:
            parser.error(f"{refused[0]}: prints timings of its own, which differ from run to run")
    sha = subprocess.run(
        ["git", "rev-parse", "--verify", f"{args.baseline}^{{commit}}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if sha.returncode != 0:
        parser.error(f"baseline: {args.baseline!r} is not a commit here")
    signal.signal(signal.SIGTERM, _interrupted)
    base = Path(tempfile.mkdtemp(prefix="berth-baseline-"))
    runs = Runs()
    try:
        checkout(sha.stdout.strip(), base)
        if not args.pure:
            compile_engine(base)
        return compare(base, args, runs)
    except RunFailed as failed:
        print(f"error: {failed}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        runs.stop()
        if not args.keep:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(base)],
                cwd=ROOT,
                capture_output=True,
                check=False,
            )
            shutil.rmtree(base, ignore_errors=True)


def ratio_line(pairs: list[tuple[float, float]]) -> str:
    """Each run's time over its partner's (working tree, baseline), and
    their median. The bench prints tenths of a second: a replay shorter
    than that reads 0.0 s, and is not divided by."""
    if any(baseline <= 0 for _, baseline in pairs):
        return (
            "working tree / baseline: not worked out, a baseline run read 0.0 s "
            "(the bench prints tenths of a second): replay more --workloads to compare times"
        )
    ratios = sorted(working / baseline for working, baseline in pairs)
    return (
        f"working tree / baseline, each run against its partner on the same core: median "
        f"{statistics.median(ratios):.3f} ({', '.join(f'{r:.3f}' for r in ratios)})"
    )


def compare(base: Path, args: argparse.Namespace, runs: Runs) -> int:
    sides = {"baseline": base, "working tree": ROOT}
    for side, tree in sides.items():
        compiled, why = engine_of(tree, args.pure)
        print(f"{side:<12}  engine: {why}")
        if not compiled and not args.pure:
            raise RunFailed(
                f"the {side}'s engine would run as pure Python beside a compiled one: "
                "run `make install` (or scripts/build_engine.py), or pass --pure"
            )
    cores: list[int | None] = []
    cores.extend(sorted(os.sched_getaffinity(0))[:2])
    if len(cores) < 2:
        cores = [None]  # one core: the turns run one after another
    times: dict[tuple[str, int, int], float] = {}
    outputs: list[tuple[str, str]] = []

    def turns(slot: int, core: int | None) -> None:
        for run in range(args.runs):
            # Each core starts with the other side; one core alone alternates.
            first = "baseline" if (slot + run * (len(cores) == 1)) % 2 == 0 else "working tree"
            for side in (first, "working tree" if first == "baseline" else "baseline"):
                try:
                    output = runs.once(sides[side], core, args.bench_args, args.pure)
                    seconds = replay_seconds(output)
                except Exception as failed:  # said by the main thread; the other core stops
                    runs.fail(str(failed))
                    return
                with runs.lock:
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
    threads = [
        threading.Thread(target=turns, args=(slot, core), daemon=True)
        for slot, core in enumerate(cores)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if runs.failures:
        raise RunFailed(runs.failures[0])
    pairs = [
        (times[("working tree", slot, run)], times[("baseline", slot, run)])
        for slot in range(len(cores))
        for run in range(args.runs)
    ]
    for side in sides:
        spread = sorted(v for k, v in times.items() if k[0] == side)
        each = ", ".join(f"{v:.1f}" for v in spread)
        print(f"{side:<12}  replay median {statistics.median(spread):.1f} s  ({each})")
    print(ratio_line(pairs))
    said = verdict(outputs)
    for line in said:
        print(line)
    return 0 if said[0].startswith("answers: the same") else 1


if __name__ == "__main__":
    raise SystemExit(main())
